// ELF64 little-endian reader (see elf_sections.hpp). Layout from the System V gABI: the file
// header gives the section header table (e_shoff, e_shentsize, e_shnum) and the index of the
// section-name string table (e_shstrndx); each section header gives its name offset, type,
// file offset, size, link and entry size. Every range is checked against the file size
// before it is read.
#include "runtime/elf_sections.hpp"

#include <cstring>

#include "common/error.hpp"

namespace patchbay::runtime {
namespace {

constexpr size_t kElfHeaderSize = 64;
constexpr size_t kSectionHeaderSize = 64;
constexpr size_t kSymbolSize = 24;
constexpr uint32_t kSectionNoBits = 8;   // SHT_NOBITS: no file space (.bss)
constexpr uint32_t kSectionDynSym = 11;  // SHT_DYNSYM

template <class T>
T read_le(const std::string& bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // the host is little-endian (x86-64)
  return value;
}

[[noreturn]] void malformed(const std::string& what) {
  throw Error(ErrorKind::kPluginRefused, "not a valid ELF64 file (" + what + ")");
}

std::string c_string_at(const std::string& table, uint64_t offset) {
  if (offset >= table.size()) return {};
  const char* s = table.data() + offset;
  return std::string(s, strnlen(s, table.size() - offset));
}

}  // namespace

ElfFile::ElfFile(const std::filesystem::path& file) : in_(file, std::ios::binary) {
  if (!in_) throw Error(ErrorKind::kIo, "cannot open for reading");
  in_.seekg(0, std::ios::end);
  size_ = static_cast<uint64_t>(in_.tellg());

  if (size_ < kElfHeaderSize) malformed("shorter than an ELF header");
  const std::string header = read(0, kElfHeaderSize);
  if (std::memcmp(header.data(),
                  "\x7f"
                  "ELF",
                  4) != 0)
    malformed("no ELF magic number");
  if (header[4] != 2) malformed("not 64-bit");
  if (header[5] != 1) malformed("not little-endian");
  type_ = read_le<uint16_t>(header, 0x10);

  const auto shoff = read_le<uint64_t>(header, 0x28);
  const auto shentsize = read_le<uint16_t>(header, 0x3A);
  const auto shnum = read_le<uint16_t>(header, 0x3C);
  const auto shstrndx = read_le<uint16_t>(header, 0x3E);
  // Boost.DLL's library_info, which runs after this reader, reads entries 64 bytes apart at
  // e_shoff whatever e_shentsize says, and the name table as a run of NUL-terminated strings
  // up to its end (a fuzzed file with an empty one was undefined behaviour there): both are
  // required to be what real linkers write.
  if (shnum == 0) malformed("no section header table");
  if (shentsize != kSectionHeaderSize) malformed("section header entries are not 64 bytes");
  const std::string table = read(shoff, uint64_t{shnum} * shentsize);
  if (shstrndx >= shnum) malformed("section name table index out of range");

  for (size_t i = 0; i < shnum; ++i) {
    const size_t at = i * shentsize;
    Section s{};
    s.name_offset = read_le<uint32_t>(table, at);
    s.type = read_le<uint32_t>(table, at + 0x04);
    s.offset = read_le<uint64_t>(table, at + 0x18);
    s.size = read_le<uint64_t>(table, at + 0x20);
    s.link = read_le<uint32_t>(table, at + 0x28);
    s.entry_size = read_le<uint64_t>(table, at + 0x38);
    sections_.push_back(std::move(s));
  }
  const Section& name_table = sections_[shstrndx];
  if (name_table.type == kSectionNoBits || name_table.size == 0)
    malformed("the section name table is empty");
  const std::string names = contents(name_table);
  if (names.back() != '\0') malformed("the section name table does not end with a NUL byte");
  for (Section& s : sections_) s.name = c_string_at(names, s.name_offset);
}

std::string ElfFile::type_name() const {
  switch (type_) {
    case 1:
      return "relocatable object";
    case 2:
      return "executable";
    case 3:
      return "shared object";
    case 4:
      return "core dump";
  }
  return "ELF type " + std::to_string(type_);
}

std::string ElfFile::read(uint64_t offset, uint64_t length) {
  if (offset > size_ || length > size_ - offset) malformed("a range lies outside the file");
  std::string out(length, '\0');
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(out.data(), static_cast<std::streamsize>(length));
  if (!in_) throw Error(ErrorKind::kIo, "read error");
  return out;
}

std::string ElfFile::contents(const Section& s) {
  if (s.type == kSectionNoBits) return {};
  return read(s.offset, s.size);
}

std::optional<std::string> ElfFile::section(const std::string& name) {
  for (const Section& s : sections_) {
    if (s.name == name) return contents(s);
  }
  return std::nullopt;
}

std::vector<std::string> ElfFile::exported_symbols() {
  std::vector<std::string> out;
  for (const Section& s : sections_) {
    if (s.type != kSectionDynSym) continue;
    if (s.link >= sections_.size()) malformed(".dynsym names a missing string table");
    if (s.entry_size != 0 && s.entry_size < kSymbolSize) malformed(".dynsym entries too small");
    const uint64_t stride = s.entry_size == 0 ? kSymbolSize : s.entry_size;
    const std::string symbols = contents(s);
    const std::string strings = contents(sections_[s.link]);
    for (uint64_t at = 0; at + kSymbolSize <= symbols.size(); at += stride) {
      const auto name = read_le<uint32_t>(symbols, at);
      const auto info = static_cast<uint8_t>(symbols[at + 4]);
      const auto other = static_cast<uint8_t>(symbols[at + 5]);
      const auto section_index = read_le<uint16_t>(symbols, at + 6);
      const unsigned binding = info >> 4;       // 1 global, 2 weak, 10 GNU unique
      const unsigned visibility = other & 0x3;  // 0 default, 3 protected
      const bool defined = section_index != 0;  // SHN_UNDEF
      if (defined && (binding == 1 || binding == 2 || binding == 10) &&
          (visibility == 0 || visibility == 3)) {
        std::string symbol = c_string_at(strings, name);
        if (!symbol.empty()) out.push_back(std::move(symbol));
      }
    }
  }
  return out;
}

}  // namespace patchbay::runtime
