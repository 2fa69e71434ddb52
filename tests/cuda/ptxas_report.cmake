# Compiles one .cu file's device code with `ptxas -v` and writes ptxas' resource report
# (registers, stack, spill stores/loads per kernel) to REPORT. Run at build time by
# tests/cuda/CMakeLists.txt, one per kernel source, so the spill check only parses text.
# -D arguments: NVCC, SOURCE, REPORT, CUBIN, FLAGS (a ;-list: arch, -std, -I, -D ...).
execute_process(
  COMMAND ${NVCC} ${FLAGS} -cubin -Xptxas -v ${SOURCE} -o ${CUBIN}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ptxas report: nvcc failed on ${SOURCE} (exit ${status}):\n${out}${err}")
endif()
file(WRITE ${REPORT} "${out}${err}")
