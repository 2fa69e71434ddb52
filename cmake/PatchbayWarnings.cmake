# Compile options every Patchbay target uses: warnings are errors (STYLE.md habit 11).
function(patchbay_strict_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers>)
endfunction()
