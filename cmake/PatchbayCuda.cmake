# CUDA for Patchbay: enabled whenever nvcc is found, and the project builds exactly as before
# without it. Read /work/shared/GPU.md (or docs/cuda.md) for what was checked about nvcc 13 here.
#
# PATCHBAY_CUDA: AUTO (default: CUDA when a CUDA compiler is found), ON (stop with a message when
#   none is found), OFF (never). The result is PATCHBAY_CUDA_ENABLED (ON/OFF) for the rest of the
#   build; targets that need CUDA test it.
# CMAKE_CUDA_ARCHITECTURES: defaults to 90a-real, i.e. exactly
#   -gencode=arch=compute_90a,code=sm_90a (Hopper, SASS only). A plain -arch=sm_90a also emits
#   compute_90 PTX, which ptxas refuses for Hopper-only instructions (wgmma); "90a" in CMake 3.25
#   adds compute_90a PTX beside the SASS, allowed but only bigger. Override on the command line
#   (-DCMAKE_CUDA_ARCHITECTURES=80 for an A100, "90a;100a-real" for two cards, ...).
# patchbay_cuda_options(<target>): what every CUDA target here uses: -std=c++20 passed outright
#   (CMake 3.25 does not know nvcc 13 has C++20: CUDA_STANDARD 20 REQUIRED fails and without
#   REQUIRED it silently compiles C++17), warnings as errors in every stage (nvcc's own, the
#   host compiler's on the host half, ptxas'), -lineinfo for profilers, and the static cudart
#   (CUDA::cudart_static alone; CUDA::cudart would add the shared one too) so the GPU machine
#   needs no matching libcudart.
# Used from the top-level CMakeLists.txt and from scripts/gpu/standalone (the GPU tests alone,
# for a build on the GPU machine with its own nvcc).
set(PATCHBAY_CUDA AUTO CACHE STRING "Build the CUDA kernels and backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE PATCHBAY_CUDA PROPERTY STRINGS AUTO ON OFF)

set(PATCHBAY_CUDA_ENABLED OFF)
if(NOT PATCHBAY_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    # The toolkit's usual home, for shells whose PATH lacks /usr/local/cuda/bin.
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(PATCHBAY_CUDA_ENABLED ON)
  elseif(PATCHBAY_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PATCHBAY_CUDA=ON but no CUDA compiler was found (expected nvcc on PATH, "
                        "in CUDACXX or at /usr/local/cuda/bin/nvcc). Install the CUDA toolkit, "
                        "or configure with -DPATCHBAY_CUDA=AUTO or OFF to build without CUDA.")
  endif()
endif()

if(PATCHBAY_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES 90a-real CACHE STRING "CUDA architectures (default: Hopper, sm_90a SASS)")
  endif()
  if(CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")  # ccache caches nvcc too
  endif()
  if(NOT CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")  # one compiler for both halves
  endif()
  enable_language(CUDA)
  # CMake 3.25 has no C++20 flag for nvcc, and a target with CXX_STANDARD 20 (every one here)
  # then asks for the "CUDA20" dialect and fails to generate. Say the dialect needs no flag of
  # CMake's own: patchbay_cuda_options passes -std=c++20 outright.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "")
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "Patchbay: CUDA on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "Patchbay: CUDA off (PATCHBAY_CUDA=${PATCHBAY_CUDA}; no CUDA compiler used)")
endif()

# Flags shared by every CUDA compile here; also used by the ptxas resource report
# (tests/cuda), which must see the same code the library gets.
option(PATCHBAY_CUDA_WERROR "CUDA warnings are errors (off only for the standalone GPU-machine build, whose compilers may warn differently)" ON)
set(PATCHBAY_CUDA_FLAGS -std=c++20 -lineinfo)
if(PATCHBAY_CUDA_WERROR)
  list(APPEND PATCHBAY_CUDA_FLAGS --Werror all-warnings
       -Xcompiler=-Wall,-Wextra,-Werror,-Wno-missing-field-initializers)
else()
  list(APPEND PATCHBAY_CUDA_FLAGS -Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers)
endif()

function(patchbay_cuda_options target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${PATCHBAY_CUDA_FLAGS}>)
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_link_libraries(${target} INTERFACE CUDA::cudart_static)
  else()
    target_link_libraries(${target} PUBLIC CUDA::cudart_static)
  endif()
endfunction()

# patchbay_cuda_static_host_runtime(<executable>): libstdc++ and libgcc linked statically, so a
# test or benchmark binary built here loads on the GPU machine whatever its libstdc++ (it then
# needs only glibc and, for GEMMs, CUDA 13's libcublasLt).
function(patchbay_cuda_static_host_runtime target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
endfunction()
