// A small reader of ELF64 little-endian section contents, enough to read a plugin's metadata
// section from the file without loading it (Boost.DLL's library_info lists sections and
// symbols but does not hand out section bytes).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace patchbay::runtime {

// The bytes of section `name`, std::nullopt when the file has no such section. Throws
// Error(kPluginRefused) when the file is not a well-formed ELF64 little-endian file (the
// message says what is wrong: too short, bad magic, offsets outside the file).
std::optional<std::string> read_elf_section(const std::filesystem::path& file,
                                            const std::string& name);

}  // namespace patchbay::runtime
