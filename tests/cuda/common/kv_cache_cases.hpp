// kv_cache_cases.hpp — the shapes on which the CUDA KV-cache kernels are checked, fp32 (test_cuda_kernels) and
// bf16 (test_cuda_bf16) alike: grouped queries (2 KV heads for 6 query heads) and not, an odd head size and one
// above a warp, a prompt chunk then single positions (decode), and a cache longer than the 48 KiB of shared
// memory a kernel gets without asking (13,000 positions).
#pragma once

#include <string>
#include <vector>

namespace axonn::test {

struct KvCacheCase {
  int B, NH, NKV, HS, Tc;
  std::vector<int> chunks;  // new positions per call, in order from position 0
  std::string describe(int chunk, int pos) const {
    return "NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV) + " HS=" + std::to_string(HS) +
           " Tc=" + std::to_string(Tc) + " chunk of " + std::to_string(chunk) + " at " + std::to_string(pos);
  }
};

inline std::vector<KvCacheCase> kv_cache_cases() {
  return {{2, 6, 2, 20, 37, {5, 1, 1, 1, 3}}, {3, 4, 4, 70, 16, {9, 1, 1}}, {1, 2, 1, 8, 13000, {3, 1}}};
}

}  // namespace axonn::test
