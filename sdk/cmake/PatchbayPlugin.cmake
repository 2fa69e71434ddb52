# patchbay_add_plugin(<target> SOURCES <files...> [LIBS <libs...>] [OUTPUT_NAME <name>])
#
# Builds one Patchbay plugin: a MODULE library (never linked against, only dlopen'ed), C++20,
# hidden visibility and a version script so the only exported symbols are the ones
# PATCHBAY_PLUGIN defines (the entry alias and the metadata constant), no undefined symbols (a plugin reaches the host only
# through the pb_host_api table it is handed), file name without the "lib" prefix
# (<target>.so), written into ${PATCHBAY_PLUGIN_OUTPUT_DIR} when that variable is set.
# Used by the built-in plugins in the source tree and, installed, by third parties through
# find_package(Patchbay).
#
# `cmake --install` puts the plugin in <prefix>/lib/patchbay/plugins (component
# patchbay_plugins), the folder an installed `patchbay` searches; a directory that sets
# PATCHBAY_PLUGIN_NO_INSTALL (the Patchbay tree's test fixtures) installs nothing.
#
# Build type: a single-config generator with no CMAKE_BUILD_TYPE builds unoptimised (-O0);
# including this file makes Release the default, so the documented `cmake -S . -B build`
# gives an optimised plugin. An explicit -DCMAKE_BUILD_TYPE=... wins.
get_property(_patchbay_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
if(NOT _patchbay_multi_config AND NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type (Patchbay plugins default to Release)" FORCE)
endif()
unset(_patchbay_multi_config)

function(patchbay_add_plugin target)
  cmake_parse_arguments(PB "" "OUTPUT_NAME" "SOURCES;LIBS" ${ARGN})
  if(NOT PB_SOURCES)
    message(FATAL_ERROR "patchbay_add_plugin(${target}): SOURCES is required")
  endif()
  if(PB_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "patchbay_add_plugin(${target}): unknown arguments ${PB_UNPARSED_ARGUMENTS}")
  endif()
  add_library(${target} MODULE ${PB_SOURCES})
  target_link_libraries(${target} PRIVATE patchbay::sdk ${PB_LIBS})
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    CXX_EXTENSIONS OFF
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(PB_OUTPUT_NAME)
    set_target_properties(${target} PROPERTIES OUTPUT_NAME ${PB_OUTPUT_NAME})
  endif()
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Export exactly the entry alias and the metadata constant: header templates with
    # default visibility (libstdc++ internals) would otherwise be exported as GNU-unique
    # symbols, which clash across plugins and make a library impossible to unload.
    set(exports_map ${CMAKE_BINARY_DIR}/patchbay-plugin-exports.map)
    file(CONFIGURE OUTPUT ${exports_map} CONTENT
      "{\n  global: patchbay_plugin_entry; patchbay_plugin_metadata;\n  local: *;\n};\n")
    target_link_options(${target} PRIVATE LINKER:--no-undefined LINKER:--version-script=${exports_map})
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${exports_map})
  endif()
  if(PATCHBAY_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PATCHBAY_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT PATCHBAY_PLUGIN_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION lib/patchbay/plugins
            COMPONENT patchbay_plugins)
  endif()
  # In the Patchbay tree every target compiles with warnings as errors.
  if(COMMAND patchbay_strict_warnings)
    patchbay_strict_warnings(${target})
  endif()
endfunction()
