// safetensors: round trip, layout details other tools rely on, and corrupt-file errors.
#include "run/safetensors.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

namespace {
template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
}  // namespace

TEST_CASE("safetensors round trip keeps names, order, dtypes, shapes, data and metadata") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "a.safetensors";
  std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  std::vector<int64_t> step = {42};
  std::vector<uint16_t> half = {0x3f80, 0xbf80};
  write_safetensors(path,
                    {{"w", StoredDType::kF32, {2, 3}, bytes_of(w)},
                     {"step", StoredDType::kI64, {1}, bytes_of(step)},
                     {"h", StoredDType::kBF16, {2}, bytes_of(half)}},
                    {{"format", "pt"}, {"config", "a = 1"}});
  SafetensorsFile file(path);
  CHECK(file.names() == std::vector<std::string>{"w", "step", "h"});
  CHECK(file.metadata().at("config") == "a = 1");
  const auto& t = file.tensor("w");
  CHECK(t.dtype == StoredDType::kF32);
  CHECK(t.shape == std::vector<int64_t>{2, 3});
  REQUIRE(t.data.size() == 24);
  CHECK(std::memcmp(t.data.data(), w.data(), 24) == 0);
  CHECK(file.tensor("h").dtype == StoredDType::kBF16);
}

TEST_CASE("safetensors header is 8-byte aligned JSON after a little-endian length") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "b.safetensors";
  std::vector<float> x = {1.0f};
  write_safetensors(path, {{"x", StoredDType::kF32, {1}, bytes_of(x)}}, {});
  std::ifstream in(path, std::ios::binary);
  unsigned char le[8];
  in.read(reinterpret_cast<char*>(le), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(le[i]) << (8 * i);
  CHECK(n % 8 == 0);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto json = nlohmann::json::parse(header);
  CHECK(json["x"]["data_offsets"] == nlohmann::json::array({0, 4}));
  CHECK(fs::file_size(path) == 8 + n + 4);
}

TEST_CASE("a truncated safetensors file is refused with the file name") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "c.safetensors";
  std::vector<float> x(100, 1.0f);
  write_safetensors(path, {{"x", StoredDType::kF32, {100}, bytes_of(x)}}, {});
  fs::resize_file(path, fs::file_size(path) - 10);
  try {
    SafetensorsFile file(path);
    FAIL("expected an error");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("c.safetensors") != std::string::npos);
    CHECK(std::string(e.what()).find("outside the file") != std::string::npos);
  }
}

TEST_CASE("asking for a missing tensor lists the available ones") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "d.safetensors";
  std::vector<float> x = {1.0f};
  write_safetensors(path, {{"wte", StoredDType::kF32, {1}, bytes_of(x)}}, {});
  SafetensorsFile file(path);
  CHECK_THROWS_WITH_AS(file.tensor("wpe"), doctest::Contains("it holds: wte"), patchbay::Error);
}

TEST_CASE("a shape that disagrees with the byte count is refused before writing") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "e.safetensors";
  std::vector<float> x = {1.0f, 2.0f};
  CHECK_THROWS_AS(write_safetensors(path, {{"x", StoredDType::kF32, {3}, bytes_of(x)}}, {}),
                  patchbay::Error);
  CHECK_FALSE(fs::exists(path));
}
