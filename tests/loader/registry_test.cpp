// The registry with plugins that load: lookup and "did you mean", creating objects through
// TokenizerHandle, plugin errors carried through as patchbay::Error, library lifetime, and
// search-path precedence between two copies of one plugin.
#include <doctest/doctest.h>

#include "loader_test_support.hpp"

using loader_test::contains;
using loader_test::fixture;
using loader_test::ScratchFolder;
namespace rt = patchbay::runtime;

namespace {

rt::TokenizerHandle make_tokenizer(rt::Registry& registry, const std::string& name) {
  rt::ComponentConfig config(*registry.find(PB_KIND_TOKENIZER, name).descriptor);
  return registry.create_tokenizer(name, config.view());
}

}  // namespace

TEST_CASE("hello_tokenizer loads, describes itself and round-trips every byte") {
  rt::Registry registry;
  registry.scan({fixture("hello_tokenizer")});
  REQUIRE(registry.refused().empty());
  const rt::ComponentEntry& c = registry.find(PB_KIND_TOKENIZER, "identity-byte");
  CHECK(c.version == "1.0.0");
  CHECK(contains(c.summary, "every byte is its own token"));
  CHECK(registry.plugin_of(c).metadata.name == "hello-tokenizer");

  rt::TokenizerHandle tok = make_tokenizer(registry, "identity-byte");
  CHECK(tok.vocab_size() == 257);
  CHECK(tok.byte_level());
  CHECK_FALSE(tok.can_train());
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = tok.encode(all_bytes);
  REQUIRE(ids.size() == 256);
  CHECK(ids[255] == 255);
  CHECK(tok.decode(ids) == all_bytes);

  const auto specials = tok.special_tokens();
  REQUIRE(specials.size() == 1);
  CHECK(specials[0].text == "<|eos|>");
  CHECK(specials[0].id == 256);
  CHECK(tok.encode("a<|eos|>", /*allow_special=*/true) == std::vector<int32_t>{97, 256});
  CHECK(tok.encode("a<|eos|>", /*allow_special=*/false).size() == 8);
}

TEST_CASE("config values reach the plugin, save/load round-trips its state") {
  rt::Registry registry;
  registry.scan({fixture("hello_tokenizer")});
  rt::ComponentConfig config(*registry.find(PB_KIND_TOKENIZER, "identity-byte").descriptor);
  config.set_string("eos_token", "<END>");
  rt::TokenizerHandle tok = registry.create_tokenizer("identity-byte", config.view());
  CHECK(tok.special_tokens().at(0).text == "<END>");

  ScratchFolder folder("save");
  const std::string path = (folder.path() / "tok.bin").string();
  tok.save(path);
  rt::TokenizerHandle other = make_tokenizer(registry, "identity-byte");
  CHECK(other.special_tokens().at(0).text == "<|eos|>");
  other.load(path);
  CHECK(other.special_tokens().at(0).text == "<END>");
  CHECK(other.decode(std::vector<int32_t>{256}) == "<END>");
}

TEST_CASE("a plugin's status text comes back in patchbay::Error") {
  rt::Registry registry;
  registry.scan({fixture("hello_tokenizer"), fixture("throwing")});
  REQUIRE(registry.refused().empty());

  rt::TokenizerHandle tok = make_tokenizer(registry, "identity-byte");
  try {
    tok.decode(std::vector<int32_t>{1, 999});
    FAIL("decode of an out-of-range id should throw");
  } catch (const patchbay::Error& e) {
    CHECK(contains(e.what(), "tokenizer 'identity-byte' (" + fixture("hello_tokenizer").string() +
                                 "): decode failed: tokenizer decode: token id 999 is outside "
                                 "[0, 257) [PB_STATUS_OUT_OF_RANGE]"));
    CHECK(e.kind() == patchbay::ErrorKind::kInvalidArgument);
  }
  try {
    tok.load("/nonexistent/folder/tok.bin");
    FAIL("load of a missing file should throw");
  } catch (const patchbay::Error& e) {
    CHECK(contains(e.what(), "cannot open '/nonexistent/folder/tok.bin' for reading"));
    CHECK(e.kind() == patchbay::ErrorKind::kIo);
  }
}

TEST_CASE("a failing factory is an Error naming the component, the file and the plugin's text") {
  rt::Registry registry;
  registry.scan({fixture("throwing")});
  rt::ComponentConfig config(*registry.find(PB_KIND_TOKENIZER, "factory-fails").descriptor);
  config.set_string("merges", "merges-v2.txt");
  try {
    registry.create_tokenizer("factory-fails", config.view());
    FAIL("create should throw");
  } catch (const patchbay::Error& e) {
    CHECK(contains(e.what(), "tokenizer 'factory-fails' (plugin 'fixture-throwing', " +
                                 fixture("throwing").string() +
                                 ") could not be created: tokenizer create: merges file "
                                 "'merges-v2.txt' does not exist [PB_STATUS_NOT_FOUND]"));
    CHECK(e.kind() == patchbay::ErrorKind::kNotFound);
  }
}

TEST_CASE("every exception type thrown by plugin code becomes a status at the boundary") {
  rt::Registry registry;
  registry.scan({fixture("throwing")});
  rt::TokenizerHandle tok = make_tokenizer(registry, "throws");
  CHECK_THROWS_WITH_AS(tok.encode("x"),
                       doctest::Contains("encode failed: tokenizer encode: boom in encode "
                                         "[PB_STATUS_INTERNAL]"),
                       patchbay::Error);
  const std::vector<int32_t> ids{1};
  CHECK_THROWS_WITH_AS(tok.decode(ids),
                       doctest::Contains("unknown exception (not derived from std::exception)"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(tok.train("text"), doctest::Contains("[PB_STATUS_OUT_OF_MEMORY]"),
                       patchbay::Error);
}

TEST_CASE("find suggests the closest names of that kind") {
  rt::Registry registry;
  registry.scan({fixture("hello_tokenizer"), fixture("throwing")});
  try {
    registry.find(PB_KIND_TOKENIZER, "identity-bytes");
    FAIL("find should throw");
  } catch (const patchbay::Error& e) {
    CHECK(e.kind() == patchbay::ErrorKind::kComponentNotFound);
    CHECK(contains(e.what(),
                   "no tokenizer named 'identity-bytes'. Did you mean 'identity-byte'? "
                   "Available tokenizers: factory-fails, identity-byte, throws."));
    CHECK(contains(e.what(), "Plugin path searched: " + fixture("hello_tokenizer").string()));
  }
  CHECK(registry.suggestions(PB_KIND_TOKENIZER, "throw").front() == "throws");
  try {
    registry.find(PB_KIND_TOKENIZER, "zzzzzzzzzz");
    FAIL("find should throw");
  } catch (const patchbay::Error& e) {
    CHECK_FALSE(contains(e.what(), "Did you mean"));  // nothing is close: no false hint
  }
  CHECK_THROWS_WITH_AS(registry.find(PB_KIND_SAMPLER, "greedy"),
                       doctest::Contains("Available samplers: none."), patchbay::Error);
}

TEST_CASE("an object keeps its plugin loaded after the registry is gone") {
  std::optional<rt::TokenizerHandle> tok;
  {
    rt::Registry registry;
    registry.scan({fixture("hello_tokenizer")});
    tok.emplace(make_tokenizer(registry, "identity-byte"));
  }
  // The registry's reference to the library is gone; the handle's keeps the code mapped.
  CHECK(tok->decode(tok->encode("still here")) == "still here");
  tok.reset();  // destroy() runs, then the library is released
}

TEST_CASE("two copies of one plugin: the earlier search-path entry wins") {
  ScratchFolder first("first"), second("second");
  first.copy_in(fixture("hello_tokenizer"), "hello_tokenizer.so");
  second.copy_in(fixture("hello_tokenizer"), "hello_tokenizer.so");
  rt::Registry registry;
  registry.scan({second.path(), first.path()});
  REQUIRE(registry.plugins().size() == 1);
  CHECK(registry.plugins()[0]->file.parent_path() == second.path());
  REQUIRE(registry.refused().size() == 1);
  CHECK(contains(registry.refused()[0].reason,
                 (first.path() / "hello_tokenizer.so").string() +
                     ": plugin 'hello-tokenizer' is already loaded from " +
                     (second.path() / "hello_tokenizer.so").string()));
}

TEST_CASE("the host api hands out aligned memory and status objects") {
  const pb_host_api* api = rt::host_api();
  CHECK(api->struct_size == sizeof(pb_host_api));
  CHECK(api->abi_major == PB_ABI_VERSION_MAJOR);
  void* p = api->alloc(100, 256);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 256 == 0);
  api->free(p);
  CHECK(api->alloc(16, 3) == nullptr);  // not a power of two
  CHECK(api->status_create(PB_STATUS_OK, "fine") == nullptr);
  pb_status* s = api->status_create(PB_STATUS_IO_ERROR, "disk full");
  CHECK(api->status_code(s) == PB_STATUS_IO_ERROR);
  CHECK(std::string(api->status_message(s)) == "disk full");
  api->status_free(s);
}
