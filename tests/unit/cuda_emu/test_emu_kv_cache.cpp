// The CUDA KV cache's kernels (kv_cache.cuh: the append of a chunk's keys and values, a chunk's attention over
// the cache) run on the CPU by the SIMT emulator against kernels::ref, fp32 and bf16, on the GPU tests' cases
// (kv_cache_cases.hpp: grouped queries and not, an odd head size and one above a warp, a prompt chunk then single
// positions, a cache longer than the 48 KiB of shared memory a kernel gets without asking), launched as
// kv_cache.cu launches them, under both warp orders. The bounds are the GPU tests': the cache's copies exact and
// nothing else written; the attention within 1e-4 relative in fp32, one bf16 ulp in bf16. They are what
// `generate --kernels cuda` runs per token (still refused until GpuGenerate passes on a GPU).
#define AXONN_SIMT_EMULATOR 1
#include "simt_emulator.hpp"
//
#include "kernels/cuda/kv_cache.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_bound.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "kv_cache_cases.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
namespace emu = axonn::emu;
namespace kv = axonn::kernels::cuda::kv_cache;
using axonn::test::allclose;
using axonn::test::KvCacheCase;
using axonn::test::randn;
using axonn::test::to_bf;
using axonn::test::widen;
using k::bf16;
using Vec = std::vector<float>;

namespace {

// kv_cache.cu's append and attend (their shape checks are the host's, tested without a GPU elsewhere)
template <typename E>
void append(E* kc, E* vc, const E* qkv, int B, int n, int pos, int Tc, int NH, int NKV, int HS,
            emu::Schedule schedule) {
  const int64_t elements = static_cast<int64_t>(B) * n * NKV * HS;
  const unsigned blocks = axonn::kernels::cuda::detail::grid_for(elements, kv::kAppendThreads);
  emu::launch(
      blocks, kv::kAppendThreads, 0,
      [&] { kv::kv_cache_append_kernel<E>(kc, vc, qkv, n, pos, Tc, NH * HS, NKV * HS, elements); }, schedule);
}
template <typename E>
void attend(E* out, const E* qkv, const E* kc, const E* vc, int B, int n, int pos, int Tc, int NH, int NKV, int HS,
            emu::Schedule schedule) {
  const auto blocks = static_cast<unsigned>(static_cast<int64_t>(B) * NH * n);
  emu::launch(
      blocks, kv::kCachedAttentionThreads, kv::attention_cached_smem(Tc, HS),
      [&] {
        kv::attention_cached_kernel<E>(out, qkv, kc, vc, n, pos, Tc, NH, NH / NKV, HS,
                                       1.0f / std::sqrt(static_cast<float>(HS)));
      },
      schedule);
}

// Each case's chunks in order, the emulated kernels beside the oracle's table; E's values through `to_e`, back
// through `to_f32`; the attention's outputs within `close(got, want, magnitude)`. Queries, keys and values of
// unit size, and 10 times that: scores near a hundred, whose exponentials overflow fp32 unless the row's true
// maximum is taken first (a stale maximum gives inf and NaN); fp32's rounding of such scores moves the outputs by
// about 1e-4 of their terms, so there the bound is looser.
template <typename E, typename ToE, typename ToF32, typename Close>
void check_cases(const k::OpTable<E>& ref, ToE to_e, ToF32 to_f32, Close close) {
  for (const emu::Schedule schedule : {emu::Schedule::kLowestFirst, emu::Schedule::kHighestFirst})
    for (const float magnitude : {1.0f, 10.0f})
      for (const KvCacheCase& c : axonn::test::kv_cache_cases()) {
        const int Q = c.NH * c.HS, K = c.NKV * c.HS, W = Q + 2 * K;
        const size_t cache = static_cast<size_t>(c.B) * c.Tc * K;
        std::vector<E> kc = to_e(Vec(cache, 7.0f)), vc = kc, e_kc = kc, e_vc = kc;
        int pos = 0;
        for (const int n : c.chunks) {
          const std::string what = c.describe(n, pos) + ", magnitude " + std::to_string(magnitude) +
                                   (schedule == emu::Schedule::kLowestFirst ? "" : ", high first");
          const std::vector<E> qkv =
              to_e(randn(static_cast<size_t>(c.B) * n * W, static_cast<uint32_t>(10 + pos), magnitude));
          std::vector<E> out(static_cast<size_t>(c.B) * n * Q), e_out = to_e(Vec(out.size(), 9.0f));
          ref.kv_cache_append(kc.data(), vc.data(), qkv.data(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS);
          ref.attention_cached_forward(out.data(), qkv.data(), kc.data(), vc.data(), c.B, n, pos, c.Tc, c.NH, c.NKV,
                                       c.HS);
          append(e_kc.data(), e_vc.data(), qkv.data(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS, schedule);
          attend(e_out.data(), qkv.data(), e_kc.data(), e_vc.data(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS, schedule);
          EXPECT_EQ(e_kc, kc) << what << ": the keys' copies, exact, and nothing else written";
          EXPECT_EQ(e_vc, vc) << what << ": the values' copies";
          EXPECT_TRUE(close(to_f32(e_out), to_f32(out), magnitude)) << what;
          pos += n;
        }
      }
}

}  // namespace

TEST(EmuKvCache, AppendAndAttendOverTheCacheMatchRef) {
  check_cases<float>(
      k::ops_for(k::Backend::kRef), [](const Vec& v) { return v; }, [](const Vec& v) { return v; },
      [](const Vec& got, const Vec& want, float magnitude) {
        return magnitude == 1.0f ? allclose(got, want, 1e-5f, 1e-4f) : allclose(got, want, 1e-3f, 1e-3f);
      });
}

TEST(EmuKvCache, Bf16AppendAndAttendMatchRefBf16) {
  check_cases<bf16>(
      k::ref_bf16_ops(), [](const Vec& v) { return to_bf(v); }, [](const std::vector<bf16>& v) { return widen(v); },
      [](const Vec& got, const Vec& want, float magnitude) {
        return magnitude == 1.0f ? allclose(got, want, axonn::test::kBf16Abs, axonn::test::kBf16Ulp)
                                 : allclose(got, want, 1e-2f, 2 * axonn::test::kBf16Ulp);
      });
}
