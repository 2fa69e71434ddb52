# Build-speed switches for a fresh build (measured figures: docs/BENCHMARKS.md, "Fresh build").
#
# PATCHBAY_PRECOMPILED_HEADERS: the third-party headers that cost the most to parse
# (each 1-2 CPU seconds per translation unit with GCC 12: TOML++, Boost.Program_options,
# nlohmann/json, Boost.DLL, spdlog, oneDNN) are precompiled once per target (every target
# through patchbay_strict_warnings): those its sources reach by #include, directly or through
# project headers (scanned at configure time, so a new file joins by itself). Off: every TU
# parses what it includes, as usual. Warnings stay errors either way: GCC reports nothing
# from system headers, precompiled or not.
# Measured on core/train (10 sources): 37.3 CPU s without, 41.0 with (8.1 to build the PCH;
# the two heavy sources gain 2-3 s each, the light ones lose 0.2-0.7 s loading it), so it is
# off; it pays only in targets with many sources that use the heavy headers.
option(PATCHBAY_PRECOMPILED_HEADERS "Precompile heavy third-party headers per target" OFF)

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

# PATCHBAY_UNITY_BUILD: every host target that passes through patchbay_strict_warnings
# (libraries, the CLI, plugins, tests — new ones join by themselves) is compiled as unity
# batches of up to 8 sources (CMake UNITY_BUILD): shared headers are parsed once per batch.
# Measured on core/train (its 10 sources as one unity file): 37.3 -> 17.0 CPU seconds. Off by default until a whole-tree unity
# build has passed with -Werror (sources that reuse a name in an anonymous namespace collide
# in one batch: rename one, or set SKIP_UNITY_BUILD_INCLUSION on the file).
option(PATCHBAY_UNITY_BUILD "Compile host targets as unity batches (fewer CPU seconds)" OFF)
function(_patchbay_unity_build target)
  if(PATCHBAY_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
