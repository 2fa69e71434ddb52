// Every way a plugin file can be bad, each refused with a message that names the file, the
// problem and what to do, and none of them crashing or stopping the host.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

#include "loader_test_support.hpp"

using loader_test::contains;
using loader_test::fixture;
using loader_test::refusal_of;
using loader_test::ScratchFolder;
namespace rt = patchbay::runtime;

TEST_CASE("a text file named .so is refused as not a shared library") {
  ScratchFolder folder("text");
  const auto file =
      folder.write("bad.so", std::string(200, '#') + "\nthis is a text file, not a library\n");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": not a shared library"));
  CHECK(contains(reason, "no ELF magic number"));
}

TEST_CASE("truncated copies of a good plugin are refused, never crash") {
  ScratchFolder folder("truncated");
  std::ifstream in(fixture("hello_tokenizer"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 4096);
  for (const size_t keep : {size_t{10}, size_t{64}, size_t{2000}, bytes.size() / 2}) {
    CAPTURE(keep);
    const auto file = folder.write("cut" + std::to_string(keep) + ".so", bytes.substr(0, keep));
    const std::string reason = refusal_of(file);
    CHECK(contains(reason, file.string() + ": not a shared library: not a valid ELF64 file"));
  }
}

TEST_CASE("a section name table without its final NUL is refused before Boost.DLL reads it") {
  // Boost.DLL's library_info walks the table string by string until its end; without the NUL
  // it runs past the buffer (found by tests/fuzz/fuzz_plugin_metadata).
  ScratchFolder folder("names");
  std::ifstream in(fixture("hello_tokenizer"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 4096);
  uint64_t shoff = 0;
  uint16_t shstrndx = 0;
  std::memcpy(&shoff, bytes.data() + 0x28, 8);
  std::memcpy(&shstrndx, bytes.data() + 0x3E, 2);
  const size_t header = shoff + size_t{shstrndx} * 64;
  REQUIRE(header + 64 <= bytes.size());
  const uint64_t offset = 1, size = 3;  // "ELF" of the magic number: no NUL
  std::memcpy(bytes.data() + header + 0x18, &offset, 8);
  std::memcpy(bytes.data() + header + 0x20, &size, 8);
  const auto file = folder.write("names.so", bytes);
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, "the section name table does not end with a NUL byte"));
}

TEST_CASE("a library without the entry symbol is refused") {
  const auto file = fixture("no_entry");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": exports no 'patchbay_plugin_entry' entry symbol"));
  CHECK(contains(reason, "PATCHBAY_PLUGIN"));
}

TEST_CASE("a library with the entry but no metadata section is refused") {
  const auto file = fixture("entry_without_metadata");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": has no 'patchbay_meta' metadata section"));
}

TEST_CASE("another ABI major is refused naming both versions and the file") {
  const auto file = fixture("abi_major");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": built against Patchbay ABI 2.0 but this host "
                                         "implements ABI 1.0"));
  CHECK(contains(reason, "rebuild the plugin"));
}

TEST_CASE("a newer ABI minor than the host's is refused") {
  const auto file = fixture("abi_minor");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": built against Patchbay ABI 1.1, newer than this "
                                         "host's ABI 1.0"));
}

TEST_CASE("a plugin needing a newer host is refused") {
  const auto file = fixture("min_host");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": needs Patchbay 99.0.0 or newer, this host is " +
                             rt::host_version().str()));
}

TEST_CASE("a duplicate component name refuses the later file and names the earlier one") {
  rt::Registry registry;
  registry.scan({fixture("dup_a"), fixture("dup_b")});
  REQUIRE(registry.plugins().size() == 1);
  CHECK(registry.plugins()[0]->metadata.name == "fixture-dup-a");
  REQUIRE(registry.refused().size() == 1);
  const std::string reason = registry.refused()[0].reason;
  CHECK(contains(reason, fixture("dup_b").string() +
                             ": provides tokenizer 'dup', which plugin "
                             "'fixture-dup-a' (" +
                             fixture("dup_a").string() + ") already provides"));
  CHECK(registry.find(PB_KIND_TOKENIZER, "dup").name == "dup");
}

TEST_CASE("a NULL required callback is refused after loading") {
  const auto file = fixture("null_callback");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() +
                             ": component tokenizer 'null-destroy': required callback 'destroy' "
                             "is NULL"));
}

TEST_CASE(
    "an entry alias holding NULL, or an entry that is not the alias, is refused, never called") {
  const auto null_entry = fixture("null_entry");
  const std::string null_reason = refusal_of(null_entry);
  CHECK(contains(null_reason,
                 null_entry.string() + ": its entry 'patchbay_plugin_entry' is a NULL pointer"));
  CHECK(contains(null_reason, "PATCHBAY_PLUGIN"));
  const auto function_entry = fixture("function_entry");
  const std::string function_reason = refusal_of(function_entry);
  CHECK(contains(function_reason,
                 function_entry.string() +
                     ": its entry 'patchbay_plugin_entry' does not point at code in the plugin"));
}

TEST_CASE("metadata that disagrees with the descriptor is refused") {
  const auto file = fixture("metadata_mismatch");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": metadata and descriptor disagree on the components: "
                                         "metadata says 'tokenizer alpha 1.0.0 1.0', descriptor "
                                         "says 'tokenizer beta 1.0.0 1.0'"));
}

TEST_CASE("a schema default outside its own range is refused") {
  const auto file = fixture("bad_default");
  const std::string reason = refusal_of(file);
  CHECK(contains(reason, file.string() + ": tokenizer 'bad-default': broken config schema: key "
                                         "'vocab_size': default 10 does not fit: expected an integer in "
                                         "[256, 65536]"));
}

TEST_CASE("metadata-only scanning refuses bad versions without loading and defers the rest") {
  rt::Registry registry;
  registry.scan({fixture("abi_major"), fixture("null_callback")}, rt::LoadMode::kMetadataOnly);
  REQUIRE(registry.refused().size() == 1);  // abi_major: refused from its metadata alone
  REQUIRE(registry.plugins().size() == 1);  // null_callback: its metadata is fine
  CHECK_FALSE(registry.plugins()[0]->loaded());
  try {
    registry.find(PB_KIND_TOKENIZER, "null-destroy");
    FAIL("find should have loaded and refused the plugin");
  } catch (const patchbay::Error& e) {
    CHECK(e.kind() == patchbay::ErrorKind::kPluginRefused);
    CHECK(contains(e.what(), "required callback 'destroy' is NULL"));
  }
  CHECK(registry.plugins().empty());
  CHECK(registry.refused().size() == 2);
}

TEST_CASE("one scan over a folder of bad and good files keeps the good ones") {
  ScratchFolder folder("mixed");
  folder.write("aaa-bad.so", "garbage");
  folder.copy_in(fixture("no_entry"), "b_no_entry.so");
  folder.copy_in(fixture("hello_tokenizer"), "c_hello.so");
  folder.copy_in(fixture("abi_major"), "d_abi_major.so");
  folder.write("notes.txt", "not a .so: ignored");
  rt::Registry registry;
  registry.scan({folder.path()});
  REQUIRE(registry.plugins().size() == 1);
  CHECK(registry.plugins()[0]->metadata.name == "hello-tokenizer");
  CHECK(registry.refused().size() == 3);
}
