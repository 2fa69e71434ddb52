// Huge-page-backed host buffers (common/host_memory.hpp) and the engine's CPU allocator on
// them: alignment, and on Linux with transparent huge pages offered, the MADV_HUGEPAGE advice
// on the whole 2 MiB pages of a buffer and not on its partial last page (read back from the
// VMA flags in /proc/self/smaps, "hg": the advice, whatever pages the kernel then finds).
#include "common/host_memory.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/ops.hpp"

namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The VmFlags line of the mapping that holds `p` ("" when not found or not Linux).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = address(p) >= begin && address(p) < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  return (flags + " ").find(" " + flag + " ") != std::string::npos;
}

// THP offered in madvise or always mode (the advice is kept on the VMA in both).
bool transparent_huge_pages_offered() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(file, modes);
  return modes.find("[madvise]") != std::string::npos || modes.find("[always]") != std::string::npos;
}

// The advice is given and can be read back here; otherwise says why nothing is checked.
bool advice_checkable() {
  const int probe = 0;
  if (patchbay::host_huge_pages_enabled() && transparent_huge_pages_offered() &&
      !vm_flags_of(&probe).empty())
    return true;
  MESSAGE("no transparent huge pages offered here (or PATCHBAY_HUGE_PAGES=0): nothing to check");
  return false;
}

}  // namespace

TEST_CASE("host buffers: 64-byte aligned, 2 MiB aligned from 2 MiB up, and writable") {
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096},
                                  patchbay::kHostHugePageBytes - 64}) {
    void* p = patchbay::host_allocate(bytes);
    REQUIRE(p != nullptr);
    CHECK(address(p) % 64 == 0);
    std::memset(p, 0x5a, bytes);
    patchbay::host_free(p);
  }
  const std::size_t large = 3 * patchbay::kHostHugePageBytes + 4096;
  void* p = patchbay::host_allocate(large);
  REQUIRE(p != nullptr);
  CHECK(address(p) % (patchbay::host_huge_pages_enabled() ? patchbay::kHostHugePageBytes : 64) == 0);
  std::memset(p, 0x5a, large);
  patchbay::host_free(p);
}

TEST_CASE("whole 2 MiB pages of a large buffer carry the huge-page advice, the partial tail not") {
  if (!advice_checkable()) return;
  const std::size_t huge = patchbay::kHostHugePageBytes;
  auto* p = static_cast<unsigned char*>(patchbay::host_allocate(2 * huge + huge / 2));
  REQUIRE(p != nullptr);
  std::memset(p, 1, 2 * huge + huge / 2);
  CHECK(has_flag(vm_flags_of(p), "hg"));
  CHECK(has_flag(vm_flags_of(p + huge + 100), "hg"));
  CHECK_FALSE(has_flag(vm_flags_of(p + 2 * huge + 100), "hg"));  // the partial last page
  patchbay::host_free(p);

  // The engine's CPU tensors take their memory here: a 3 MiB tensor starts on a huge page.
  const patchbay::engine::Tensor t = patchbay::engine::zeros({3 << 18});
  CHECK(address(t.data_ptr()) % huge == 0);
  CHECK(has_flag(vm_flags_of(t.data_ptr()), "hg"));
}

TEST_CASE("memory given back is unmapped: the next buffers carry no stale advice") {
  if (!advice_checkable()) return;
  // A large block freed, then small heap blocks: none of them lands in advised memory.
  void* large = patchbay::host_allocate(9 * patchbay::kHostHugePageBytes);
  REQUIRE(large != nullptr);
  std::memset(large, 1, 9 * patchbay::kHostHugePageBytes);
  patchbay::host_free(large);
  CHECK_FALSE(has_flag(vm_flags_of(large), "hg"));  // unmapped (or someone else's now)
  for (int i = 0; i < 64; ++i) {
    void* small = patchbay::host_allocate(4096);
    REQUIRE(small != nullptr);
    CHECK_FALSE(has_flag(vm_flags_of(small), "hg"));
    patchbay::host_free(small);
  }
  patchbay::host_free(nullptr);  // allowed
}
