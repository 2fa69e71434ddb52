// Command-line driver for run_attention_bench (the engine's `patchbay bench ops` calls the
// same function). Usage:
//   patchbay_kernels_attention_bench [max_T [naive_max_T [threads [isa [window [alibi
//                                    [packed_segment_len]]]]]]]
// isa: generic | avx2 | avx512 | auto (default: the best this CPU has); window > 0 and/or
// alibi = 1 add a "flash*" row with those options after each plain flash row;
// packed_segment_len L > 0 adds a "packed" row: the same call with every row cut into
// segments of L positions (packed sequences, docs/packing.md).
// e.g. `patchbay_kernels_attention_bench 4096` runs T = 256 ... 4096, causal, B=1 H=12 D=64.
#include <cstdlib>
#include <iostream>
#include <string>

#include "patchbay/kernels/attention_bench.hpp"
#include "patchbay/kernels/attention_flash.hpp"

int main(int argc, char** argv) {
  namespace pk = patchbay::kernels;
  pk::AttentionBenchConfig config;
  if (argc > 1) {
    const long long max_t = std::atoll(argv[1]);
    config.seq_lens.clear();
    for (long long t = 256; t <= max_t; t *= 2) config.seq_lens.push_back(t);
  }
  if (argc > 2) config.naive_max_seq_len = std::atoll(argv[2]);
  if (argc > 3) config.num_threads = std::atoi(argv[3]);
  if (argc > 4) {
    const std::string isa = argv[4];
    config.isa = isa == "generic" ? pk::KernelIsa::generic
                 : isa == "avx2"  ? pk::KernelIsa::avx2
                 : isa == "auto"  ? pk::KernelIsa::automatic
                                  : pk::KernelIsa::avx512;
  }
  if (argc > 5) config.window = std::atoll(argv[5]);
  if (argc > 6) config.alibi = std::atoi(argv[6]) != 0;
  if (argc > 7) config.packed_segment_len = std::atoll(argv[7]);
  const pk::KernelIsa isa =
      config.isa == pk::KernelIsa::automatic ? pk::attention_flash_resolved_isa() : config.isa;
  std::cout << "isa " << pk::kernel_isa_name(isa) << ", B="
            << config.batch << " H=" << config.heads << " D=" << config.head_dim
            << (config.causal ? " causal" : " full");
  if (config.window > 0 || config.alibi)
    std::cout << "; flash* = flash with" << (config.window > 0 ? " window " + std::to_string(config.window) : "")
              << (config.alibi ? " ALiBi" : "");
  if (config.packed_segment_len > 0)
    std::cout << "; packed = flash with segments of " << config.packed_segment_len << " positions";
  std::cout << "\n";
  pk::print_attention_bench(pk::run_attention_bench(config), std::cout);
  return 0;
}
