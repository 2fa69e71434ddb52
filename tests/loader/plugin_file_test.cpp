// What the host reads from a plugin file without loading it: the metadata text (parser
// errors name the bad line) and the ELF export table (a plugin built with
// patchbay_add_plugin exports exactly the entry and the metadata constant).
#include <doctest/doctest.h>

#include <algorithm>

#include "loader_test_support.hpp"
#include "runtime/elf_sections.hpp"
#include "runtime/plugin_metadata.hpp"

namespace rt = patchbay::runtime;
using loader_test::fixture;

TEST_CASE("a plugin exports exactly the entry alias and the metadata constant") {
  rt::ElfFile elf(fixture("hello_tokenizer"));
  CHECK(elf.is_shared_object());
  std::vector<std::string> exported = elf.exported_symbols();
  std::sort(exported.begin(), exported.end());
  CHECK(exported == std::vector<std::string>{"patchbay_plugin_entry", "patchbay_plugin_metadata"});
}

TEST_CASE("the metadata section holds what PATCHBAY_PLUGIN declared") {
  const rt::PluginMetadata m = rt::read_plugin_metadata(fixture("throwing"));
  CHECK(m.name == "fixture-throwing");
  CHECK(m.version == "1.0.0");
  CHECK(m.abi_major == PB_ABI_VERSION_MAJOR);
  CHECK(m.abi_minor == PB_ABI_VERSION_MINOR);
  CHECK(m.min_host_minor == PB_ABI_SINCE_HOST_MINOR);
  REQUIRE(m.components.size() == 2);
  CHECK(m.components[0].kind == "tokenizer");
  CHECK(m.components[0].name == "factory-fails");
  CHECK(m.components[1].name == "throws");
  CHECK(m.components[1].interface_major == PB_TOKENIZER_INTERFACE_MAJOR);
}

TEST_CASE("metadata parser: unknown keys are skipped, malformed lines are named") {
  const std::string good =
      "patchbay-plugin-metadata 1\nplugin p\nversion 2.0.0\nabi 1.0\nmin-host 0.1.0\n"
      "future-key whatever it is\ncomponent sampler greedy 1.2.3 1.0\n";
  const rt::PluginMetadata m = rt::parse_plugin_metadata(good + std::string(1, '\0') + "junk");
  CHECK(m.name == "p");
  REQUIRE(m.components.size() == 1);
  CHECK(m.components[0].version == "1.2.3");

  CHECK_THROWS_WITH_AS(rt::parse_plugin_metadata("hello\n"),
                       "metadata does not start with 'patchbay-plugin-metadata N'",
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(rt::parse_plugin_metadata("patchbay-plugin-metadata 2\n"),
                       doctest::Contains("metadata format 2 is newer than this host reads (1)"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(
      rt::parse_plugin_metadata("patchbay-plugin-metadata 1\nplugin p\nversion 1\nabi 1.x\n"),
      "metadata line 'abi 1.x': 'x' is not a number", patchbay::Error);
  CHECK_THROWS_WITH_AS(
      rt::parse_plugin_metadata(
          "patchbay-plugin-metadata 1\nplugin p\nversion 1\nabi 1.0\nmin-host 0.1\n"),
      "metadata line 'min-host 0.1': expected 3 dot-separated numbers", patchbay::Error);
  CHECK_THROWS_WITH_AS(rt::parse_plugin_metadata("patchbay-plugin-metadata 1\nplugin p\n"),
                       doctest::Contains("lacks one of the lines"), patchbay::Error);
}

TEST_CASE("the tokenizer adapter follows the buffer protocol of tokenizer.h") {
  rt::Registry registry;
  registry.scan({fixture("hello_tokenizer")});
  const pb_component_descriptor* d = registry.find(PB_KIND_TOKENIZER, "identity-byte").descriptor;
  rt::ComponentConfig config(*d);
  rt::ComponentInstance instance =
      registry.create(PB_KIND_TOKENIZER, "identity-byte", config.view());
  const auto* vt = static_cast<const pb_tokenizer_vtable*>(d->vtable);

  int32_t ids[4] = {-1, -1, -1, -1};
  size_t count = 0;
  pb_status* status = vt->encode(instance.get(), "hello", 5, 0, ids, 2, &count);
  CHECK(rt::status_code(status) == PB_STATUS_BUFFER_TOO_SMALL);
  CHECK(count == 5);  // the size to retry with
  CHECK(rt::status_message(status) == "encode needs 5 ids, capacity 2");
  rt::host_api()->status_free(status);

  const int32_t hi[2] = {'h', 'i'};
  char bytes[8] = {};
  size_t length = 0;
  CHECK(vt->decode(instance.get(), hi, 2, bytes, sizeof bytes, &length) == nullptr);
  CHECK(std::string(bytes, length) == "hi");

  const char* text = nullptr;
  int32_t id = 0;
  status = vt->special_token(instance.get(), 1, &text, &id);
  CHECK(rt::status_code(status) == PB_STATUS_OUT_OF_RANGE);
  rt::host_api()->status_free(status);
}
