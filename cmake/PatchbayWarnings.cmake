# Compile options every Patchbay target uses: warnings are errors (STYLE.md habit 11).
function(patchbay_strict_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers>)
  # Every host target passes here, so build-speed switches reach new targets by themselves.
  if(COMMAND patchbay_precompile_heavy_headers)
    patchbay_precompile_heavy_headers(${target})
    _patchbay_unity_build(${target})
  endif()
endfunction()
