// safetensors: round trip, layout details other tools rely on, and corrupt-file errors.
#include "run/safetensors.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
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

// ---- verification: coverage, checksum, field types (issue 39) ----

namespace {

// A file with `header` (JSON text) and `data` bytes, laid out as safetensors does.
fs::path write_raw(const fs::path& path, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header << data;
  return path;
}

std::string error_of(const fs::path& path) {
  try {
    SafetensorsFile file(path);
  } catch (const patchbay::Error& e) {
    CHECK(e.kind() == patchbay::ErrorKind::kIo);  // corrupt input: exit code 5
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("tensors whose bytes overlap, leave a gap or leave trailing bytes are refused") {
  const patchbay::testing::TempDir scratch("safetensors");
  const std::string eight(8, '\x01');
  CHECK(error_of(write_raw(scratch / "overlap.safetensors",
                           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           eight))
            .find("'a' and 'b' overlap") != std::string::npos);
  CHECK(error_of(write_raw(scratch / "gap.safetensors",
                           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                           eight + "abcd"))
            .find("bytes 4..8 of the data section belong to no tensor") != std::string::npos);
  CHECK(error_of(write_raw(scratch / "tail.safetensors",
                           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight))
            .find("trailing bytes") != std::string::npos);
  // Two names on one range (the same bytes twice) is an overlap too.
  CHECK(error_of(write_raw(scratch / "alias.safetensors",
                           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           std::string(4, '\0')))
            .find("overlap") != std::string::npos);
}

TEST_CASE("fields of the wrong JSON type are errors naming the tensor, never internal ones") {
  const patchbay::testing::TempDir scratch("safetensors");
  const std::string four(4, '\0');
  struct Case {
    const char* header;
    const char* expected;
  };
  const Case cases[] = {
      {R"([1,2,3])", "header is a JSON array, not an object"},
      {R"({"a":{"dtype":5,"shape":[1],"data_offsets":[0,4]}})", "dtype that is not a string"},
      {R"({"a":{"dtype":"F32","shape":"x","data_offsets":[0,4]}})", "shape that is not an array"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
       "dims must be non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
       "dims must be non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
       "too large"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})", "expected [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "end before they begin"},
      {R"({"a":7})", "not an object"},
      {R"({"__metadata__":[1],"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "__metadata__ is not"},
  };
  int i = 0;
  for (const Case& c : cases) {
    INFO(c.header);
    std::string name =
        "t";  // appended piecewise: GCC 12's -Wrestrict misfires on "t" + std::string
    name += std::to_string(i++);
    const std::string message = error_of(write_raw(scratch / name, c.header, four));
    CHECK(message.find(c.expected) != std::string::npos);
  }
}

TEST_CASE("the data checksum is written, verified, and its absence is reported, not refused") {
  const patchbay::testing::TempDir scratch("safetensors");
  const auto path = scratch / "sum.safetensors";
  std::vector<float> x = {1.0f, 2.0f, 3.0f};
  write_safetensors(path, {{"x", StoredDType::kF32, {3}, bytes_of(x)}}, {{"k", "v"}});
  {
    SafetensorsFile file(path);
    CHECK(file.checksum_check() == ChecksumCheck::kVerified);
    CHECK(file.metadata().at(kDataChecksumKey).size() == 16);
  }
  // One flipped bit in the data section (the last byte of the file).
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char last = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(last ^ 0x04));
  }
  CHECK(error_of(path).find("checksum") != std::string::npos);
  // A file from before checksums (or another tool): loads, and says the check was skipped.
  const auto old =
      write_raw(scratch / "old.safetensors",
                R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  SafetensorsFile file(old);
  CHECK(file.checksum_check() == ChecksumCheck::kAbsent);
}

TEST_CASE("first_non_finite finds NaN and Inf in F32, BF16 and F16 and ignores integers") {
  std::vector<float> f = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
  CHECK(first_non_finite({StoredDType::kF32, {3}, bytes_of(f)}) == 2);
  f[2] = 0.0f;
  CHECK(first_non_finite({StoredDType::kF32, {3}, bytes_of(f)}) == -1);
  std::vector<uint16_t> bf16 = {0x3f80, 0x7f80};  // 1.0, +Inf
  CHECK(first_non_finite({StoredDType::kBF16, {2}, bytes_of(bf16)}) == 1);
  std::vector<uint16_t> f16 = {0x3c00, 0x7bff, 0xfe00};  // 1.0, 65504, NaN
  CHECK(first_non_finite({StoredDType::kF16, {3}, bytes_of(f16)}) == 2);
  std::vector<int32_t> ints = {-1, 0x7f800000};
  CHECK(first_non_finite({StoredDType::kI32, {2}, bytes_of(ints)}) == -1);
}
