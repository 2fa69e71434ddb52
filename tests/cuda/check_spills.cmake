# The register-spill check of kernels/cuda: reads ptxas -v reports (ptxas_report.cmake) and fails
# when a kernel spills registers to local memory (a hot kernel that spills loses much of its
# speed; fix by smaller tiles, fewer live values or __launch_bounds__). Prints one line per
# kernel: registers, stack frame, spill stores/loads.
# -D arguments: REPORTS (a ;-list of report files), ALLOW (optional regex of mangled kernel names
# allowed to spill: cold kernels only, each with a reason in tests/cuda/CMakeLists.txt).
find_program(CXXFILT c++filt)

# Readable kernel name: demangled when c++filt is there, without the namespaces.
function(readable_name mangled out_var)
  set(name "${mangled}")
  if(CXXFILT)
    execute_process(COMMAND ${CXXFILT} "${mangled}" OUTPUT_VARIABLE name OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REGEX REPLACE "patchbay::kernels::cuda::(\\(anonymous namespace\\)::)?" "" name "${name}")
  endif()
  set(${out_var} "${name}" PARENT_SCOPE)
endfunction()

set(failures "")
set(kernels 0)
foreach(report ${REPORTS})
  if(NOT EXISTS "${report}")
    message(FATAL_ERROR "spill check: report ${report} is missing; build the target "
                        "patchbay_cuda_ptxas_reports (it is part of `all`) first.")
  endif()
  file(STRINGS "${report}" lines)
  set(function "")
  foreach(line IN LISTS lines)
    if(line MATCHES "Function properties for ([^ ]+)")
      set(mangled "${CMAKE_MATCH_1}")
      readable_name("${mangled}" function)
    elseif(line MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
      set(stack ${CMAKE_MATCH_1})
      set(stores ${CMAKE_MATCH_2})
      set(loads ${CMAKE_MATCH_3})
      math(EXPR kernels "${kernels} + 1")
      get_filename_component(name "${report}" NAME_WE)
      set(summary "${name}: ${function}: stack ${stack} B, spill stores ${stores} B, loads ${loads} B")
      if(stores GREATER 0 OR loads GREATER 0)
        if(ALLOW AND mangled MATCHES "${ALLOW}")
          message(STATUS "allowed to spill: ${summary}")
        else()
          string(APPEND failures "  ${summary}\n")
        endif()
      endif()
    elseif(line MATCHES "Used ([0-9]+) registers")
      get_filename_component(name "${report}" NAME_WE)
      message(STATUS "${name}.cu ${function}: ${CMAKE_MATCH_1} registers, stack ${stack} B")
    endif()
  endforeach()
endforeach()
if(kernels EQUAL 0)
  message(FATAL_ERROR "spill check: no kernel found in the reports (${REPORTS}); "
                      "expected ptxas -v lines 'N bytes stack frame, N bytes spill stores ...'.")
endif()
if(failures)
  message(FATAL_ERROR "spill check: these kernels spill registers to local memory:\n${failures}"
                      "Reduce their live registers (smaller tiles, __launch_bounds__), or, for a "
                      "cold kernel only, add it to the ALLOW list in tests/cuda/CMakeLists.txt.")
endif()
message(STATUS "spill check: ${kernels} kernels, none spills")
