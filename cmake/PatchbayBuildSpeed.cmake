# Build-speed switches for a fresh build (measured figures: docs/BENCHMARKS.md, "fresh build").
#
# PATCHBAY_PRECOMPILED_HEADERS: the third-party headers that cost the most to parse
# (each 1-2 CPU seconds per translation unit with GCC 12: TOML++, Boost.Program_options,
# nlohmann/json, Boost.DLL, spdlog, oneDNN) are precompiled once per target that opts in
# with patchbay_precompile_heavy_headers(<target>), for those of them its own sources name
# in an #include (scanned at configure time, so a new file joins by itself). Off: every TU
# parses what it includes, as usual. Warnings stay errors either way: GCC reports nothing
# from system headers, precompiled or not.
option(PATCHBAY_PRECOMPILED_HEADERS "Precompile heavy third-party headers per opted-in target" OFF)

# Header -> the include pattern that marks a source as using it.
set(PATCHBAY_HEAVY_HEADERS
  "<toml++/toml.h>|toml\\+\\+/"
  "<boost/program_options.hpp>|boost/program_options"
  "<nlohmann/json.hpp>|nlohmann/json"
  "<boost/dll.hpp>|boost/dll"
  "<spdlog/spdlog.h>|spdlog/"
  "<oneapi/dnnl/dnnl.hpp>|oneapi/dnnl/dnnl.hpp")

# The include lines of `file` and of the project headers it includes, transitively (quoted
# includes resolved against the file's folder and the project's include roots); cached per
# file in a global property so each file is read once per configure.
function(_patchbay_include_closure file out_var)
  set(pending "${file}")
  set(visited "")
  set(text "")
  while(pending)
    list(POP_FRONT pending current)
    if(current IN_LIST visited)
      continue()
    endif()
    list(APPEND visited "${current}")
    get_property(lines GLOBAL PROPERTY "_patchbay_includes:${current}")
    if(NOT lines)
      file(STRINGS "${current}" lines REGEX "^[ \t]*#[ \t]*include")
      set_property(GLOBAL PROPERTY "_patchbay_includes:${current}" "${lines};")
    endif()
    string(APPEND text "${lines}\n")
    get_filename_component(folder "${current}" DIRECTORY)
    foreach(line ${lines})
      if(line MATCHES "include[ \t]*\"([^\"]+)\"")
        foreach(root "${folder}" "${PROJECT_SOURCE_DIR}/core" "${PROJECT_SOURCE_DIR}/sdk/include"
                     "${PROJECT_SOURCE_DIR}/kernels" "${PROJECT_SOURCE_DIR}")
          if(EXISTS "${root}/${CMAKE_MATCH_1}")
            get_filename_component(resolved "${root}/${CMAKE_MATCH_1}" ABSOLUTE)
            list(APPEND pending "${resolved}")
            break()
          endif()
        endforeach()
      endif()
    endforeach()
  endwhile()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# patchbay_precompile_heavy_headers(<target>): see above. Does nothing when the option is off
# or when no source of the target reaches a heavy header.
function(patchbay_precompile_heavy_headers target)
  if(NOT PATCHBAY_PRECOMPILED_HEADERS)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(text "")
  foreach(source ${sources})
    if(NOT IS_ABSOLUTE "${source}")
      set(source "${source_dir}/${source}")
    endif()
    if(source MATCHES "\\.(cpp|cc|hpp|h)$" AND EXISTS "${source}")
      _patchbay_include_closure("${source}" included)
      string(APPEND text "${included}\n")
    endif()
  endforeach()
  set(chosen "")
  foreach(entry ${PATCHBAY_HEAVY_HEADERS})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 header)
    list(GET parts 1 pattern)
    if(text MATCHES "${pattern}")
      list(APPEND chosen "$<$<COMPILE_LANGUAGE:CXX>:${header}>")  # C sources get none
    endif()
  endforeach()
  if(chosen)
    target_precompile_headers(${target} PRIVATE ${chosen})
  endif()
endfunction()

# PATCHBAY_UNITY_BUILD_TARGETS: targets compiled as unity batches (CMake UNITY_BUILD), for
# measuring; empty by default (see docs/BENCHMARKS.md for why it is not on).
set(PATCHBAY_UNITY_BUILD_TARGETS "" CACHE STRING "Targets to compile as unity batches (measurement)")
function(_patchbay_unity_build target)
  if(target IN_LIST PATCHBAY_UNITY_BUILD_TARGETS)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
  endif()
endfunction()
