// A small, bounds-checked reader of ELF64 little-endian files, enough to describe a plugin
// without loading it: the file type (shared object or not), one section's bytes (the
// metadata section) and the exported dynamic symbols (.dynsym, which `strip` keeps).
//
// Boost.DLL's library_info (1.74) lists sections and symbols but reads symbols from .symtab
// only (gone in a stripped library), hands out no section bytes and trusts the offsets in
// the file; this reader validates every offset first, so a truncated or hostile file is an
// Error, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace patchbay::runtime {

class ElfFile {
 public:
  // Throws Error(kPluginRefused) "not a valid ELF64 file (<why>)" when the header or the
  // section table is malformed, Error(kIo) when the file cannot be read.
  explicit ElfFile(const std::filesystem::path& file);

  bool is_shared_object() const { return type_ == 3; }  // ET_DYN
  std::string type_name() const;  // "shared object", "executable", "relocatable object"

  // Bytes of section `name`, std::nullopt when absent.
  std::optional<std::string> section(const std::string& name);
  // Names of the defined global/weak symbols with default or protected visibility in
  // .dynsym, i.e. what dlsym can find.
  std::vector<std::string> exported_symbols();

 private:
  struct Section {
    std::string name;
    uint32_t name_offset;  // into the section-name string table
    uint32_t type;
    uint64_t offset, size, entry_size;
    uint32_t link;
  };
  std::string read(uint64_t offset, uint64_t length);
  std::string contents(const Section& s);

  std::ifstream in_;
  uint64_t size_ = 0;
  uint16_t type_ = 0;
  std::vector<Section> sections_;
};

}  // namespace patchbay::runtime
