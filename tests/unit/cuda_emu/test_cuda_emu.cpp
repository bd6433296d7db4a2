// CUDA kernels run on the CPU by the SIMT emulator (simt_emulator.hpp): first the emulator and the warp
// primitives (warp_mma.cuh) against direct products, then the bf16 flash attention on register-resident
// tensor-core fragments (kernels/cuda/attention_bf16_mma.cuh) against the oracle, kernels::ref_bf16_ops(), with
// the GPU tests' bound (attention_bound.hpp) on the GPU tests' awkward shapes. Needs no GPU and no CUDA
// toolkit: the kernels' logic (indexing, masks, fragment layouts, the online softmax, the causal tile ranges)
// is checked in every build; their speed, and what only the hardware decides, on a GPU (tests/cuda).
#define AXONN_SIMT_EMULATOR 1
#include "simt_emulator.hpp"
// the emulator first: the kernel sources take the CUDA vocabulary from it
#include "kernels/cuda/attention_bf16_mma.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_bound.hpp"
#include "axonn/core/dtype.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "tensor_expect.hpp"

namespace {

namespace emu = axonn::emu;
namespace mma = axonn::kernels::cuda::mma;
namespace fa = axonn::kernels::cuda_bf16::mma_attention;
using axonn::bf16_to_f32;
using axonn::f32_to_bf16;
using Bf = std::vector<uint16_t>;
using Vec = std::vector<float>;

TEST(SimtEmulator, SyncthreadsOrdersSharedMemory) {
  std::vector<int> got(64, -1);
  emu::launch(dim3(2), dim3(64), 64 * sizeof(int), [&] {
    AXONN_DYNAMIC_SHARED(smem);
    int* s = reinterpret_cast<int*>(smem);
    const int i = static_cast<int>(threadIdx.x);
    s[i] = i * 10 + static_cast<int>(blockIdx.x);
    __syncthreads();
    if (blockIdx.x == 1) got[static_cast<size_t>(i)] = s[(i + 1) % 64];
  });
  for (int i = 0; i < 64; i++) EXPECT_EQ(got[static_cast<size_t>(i)], ((i + 1) % 64) * 10 + 1) << i;
}

TEST(SimtEmulator, ShuffleXorExchangesWithinEachWarp) {
  std::vector<float> got(64);
  emu::launch(dim3(1), dim3(64), 0, [&] {
    const int i = static_cast<int>(threadIdx.x);
    got[static_cast<size_t>(i)] = __shfl_xor_sync(0xffffffffu, static_cast<float>(i), 5);
  });
  for (int i = 0; i < 64; i++) EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<float>(i ^ 5));
}

TEST(SimtEmulator, ReportsADeadlockInsteadOfHanging) {
  EXPECT_THROW(emu::launch(dim3(1), dim3(32), 0,
                           [&] {
                             if (threadIdx.x == 0) return;  // leaves without reaching the barrier
                             __syncthreads();
                           }),
               std::runtime_error);
  EXPECT_THROW(emu::launch(dim3(1), dim3(33), 0, [] {}), std::invalid_argument);
}

// The warp primitives compose into exact products: small integers, so every sum is exact in fp32.
// C[16][16] = A[16][32] * B^T with B stored n-major ([16][32]: load_b_rows_n), and = A * B2 with B2 stored
// k-major ([32][16]: load_b_rows_k), both against a direct product.
TEST(WarpMma, FragmentLayoutsComposeIntoTheProduct) {
  constexpr int M = 16, N = 16, K = 32, ld = K + 8, ldk = N + 8;
  Bf a(M * ld), bn(N * ld), bk(K * ldk);
  std::vector<double> want(M * N, 0.0);
  auto val = [](int i, int j, int salt) { return static_cast<float>((i * 7 + j * 3 + salt) % 11 - 5); };
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++) a[static_cast<size_t>(m * ld + k)] = f32_to_bf16(val(m, k, 1));
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      bn[static_cast<size_t>(n * ld + k)] = f32_to_bf16(val(n, k, 2));
      bk[static_cast<size_t>(k * ldk + n)] = f32_to_bf16(val(n, k, 2));
    }
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++)
      for (int k = 0; k < K; k++) want[static_cast<size_t>(m * N + n)] += double(val(m, k, 1)) * val(n, k, 2);
  for (const bool k_major : {false, true}) {
    SCOPED_TRACE(k_major ? "B stored k-major (ldmatrix.trans)" : "B stored n-major");
    std::vector<float> got(M * N, -1.0f);
    emu::launch(dim3(1), dim3(32), 0, [&] {
      mma::FragC c[2];
      mma::zero(c[0]);
      mma::zero(c[1]);
      for (int k = 0; k < K; k += 16) {
        mma::FragA fa;
        mma::FragB b0, b1;
        mma::load_a(fa, a.data(), ld, 0, k);
        if (k_major)
          mma::load_b_rows_k(b0, b1, bk.data(), ldk, k, 0);
        else
          mma::load_b_rows_n(b0, b1, bn.data(), ld, 0, k);
        mma::mma_16816(c[0], fa, b0);
        mma::mma_16816(c[1], fa, b1);
      }
      const int L = mma::lane_index(), g = L / 4, t = L % 4;
      for (int j = 0; j < 2; j++)
        for (int e = 0; e < 4; e++)
          got[static_cast<size_t>((g + 8 * (e / 2)) * N + 8 * j + 2 * t + e % 2)] = c[j].v[e];
    });
    for (int i = 0; i < M * N; i++) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
  }
}

// A product's result as the next product's A operand (a_from_c): P (16 x 16, in two C tiles) times V.
TEST(WarpMma, AccumulatorsBecomeTheNextAOperand) {
  constexpr int N = 8, ldk = N + 8;
  Bf v(16 * ldk);
  for (int k = 0; k < 16; k++)
    for (int n = 0; n < N; n++) v[static_cast<size_t>(k * ldk + n)] = f32_to_bf16(static_cast<float>(k - n));
  std::vector<float> got(16 * N);
  emu::launch(dim3(1), dim3(32), 0, [&] {
    const int L = mma::lane_index(), g = L / 4, t = L % 4;
    mma::FragC p[2];  // P[m][k] = m + 2k, exact in bf16
    for (int j = 0; j < 2; j++)
      for (int e = 0; e < 4; e++) p[j].v[e] = static_cast<float>((g + 8 * (e / 2)) + 2 * (8 * j + 2 * t + e % 2));
    mma::FragB b0, b1;
    mma::load_b_rows_k(b0, b1, v.data(), ldk, 0, 0);  // b1 (columns 8..15) is padding here
    mma::FragC o;
    mma::zero(o);
    mma::mma_16816(o, mma::a_from_c(p[0], p[1]), b0);
    for (int e = 0; e < 4; e++) got[static_cast<size_t>((g + 8 * (e / 2)) * N + 2 * t + e % 2)] = o.v[e];
  });
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < N; n++) {
      double want = 0.0;
      for (int k = 0; k < 16; k++) want += double(m + 2 * k) * (k - n);
      EXPECT_EQ(got[static_cast<size_t>(m * N + n)], want) << m << "," << n;
    }
}

// ---- the flash attention on register-resident fragments against the oracle ----

struct Emulated {
  Bf out, dqkv;
  Vec lse;
};

// How the emulator runs a kernel: which warps go first, when asynchronous copies land.
struct Mode {
  emu::Schedule schedule;
  emu::CopyTiming copies;
  std::string name() const {
    return std::string(schedule == emu::Schedule::kLowestFirst ? "warp 0 first" : "last warp first") +
           (copies == emu::CopyTiming::kAtWait ? ", copies land at the wait" : ", copies land at issue");
  }
};
const Mode kModes[] = {{emu::Schedule::kLowestFirst, emu::CopyTiming::kAtWait},
                       {emu::Schedule::kHighestFirst, emu::CopyTiming::kAtWait},
                       {emu::Schedule::kLowestFirst, emu::CopyTiming::kAtIssue},
                       {emu::Schedule::kHighestFirst, emu::CopyTiming::kAtIssue}};

// The three kernels as attention_bf16_tc.cu launches them, every block run in `mode`; the backward from the
// oracle's lse and D (as the GPU tests do), added to d0.
template <int HS>
Emulated run_attention(const Bf& qkv, const Bf& dy, const Bf& d0, const Vec& lse_ref, const Vec& D, int B, int T,
                       int NH, Mode mode) {
  const int C = NH * HS;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS)), scale_log2 = scale * fa::kLog2e;
  const dim3 grid = fa::grid_of(B, T, NH), block(fa::kThreads);
  // out and lse start as NaN: every element must be written
  Emulated r{Bf(dy.size(), 0x7fc0), d0, Vec(lse_ref.size(), NAN)};
  emu::launch(
      grid, block, fa::Layout<HS>::kForward,
      [&] { fa::forward_kernel<HS>(r.out.data(), r.lse.data(), qkv.data(), T, C, NH, scale_log2); }, mode.schedule,
      mode.copies);
  emu::launch(
      grid, block, fa::Layout<HS>::kBackward,
      [&] {
        fa::backward_dq_kernel<HS>(r.dqkv.data(), D.data(), dy.data(), qkv.data(), lse_ref.data(), T, C, NH, scale,
                                   scale_log2);
      },
      mode.schedule, mode.copies);
  emu::launch(
      grid, block, fa::Layout<HS>::kBackward,
      [&] {
        fa::backward_dkv_kernel<HS>(r.dqkv.data(), D.data(), dy.data(), qkv.data(), lse_ref.data(), T, C, NH, scale,
                                    scale_log2);
      },
      mode.schedule, mode.copies);
  return r;
}

void check_attention(int B, int T, int NH, int HS, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
               " HS=" + std::to_string(HS));
  const int C = NH * HS;
  const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, nout = static_cast<size_t>(B) * T * C,
               nlse = static_cast<size_t>(B) * NH * T;
  const auto& oracle = axonn::kernels::ref_bf16_ops();
  const Bf qkv = axonn::test::rand_bf(nqkv, seed, 1.5f), dy = axonn::test::rand_bf(nout, seed + 1),
           d0 = axonn::test::rand_bf(nqkv, seed + 2);
  Bf out(nout), dqkv(d0);
  Vec lse(nlse), D(nlse);
  oracle.attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  oracle.attention_backward(dqkv.data(), D.data(), dy.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  const auto mag = axonn::test::attention_magnitudes(qkv, dy, out, lse, D, B, T, C, NH);

  for (const Mode& mode : kModes) {
    SCOPED_TRACE(mode.name());
    const Emulated e = HS == 64 ? run_attention<64>(qkv, dy, d0, lse, D, B, T, NH, mode)
                                : run_attention<128>(qkv, dy, d0, lse, D, B, T, NH, mode);
    EXPECT_TRUE(axonn::test::close_attention(e.out, out, {&mag.out})) << "out";
    EXPECT_TRUE(axonn::test::allclose(e.lse, lse, 1e-5f, 1e-5f)) << "lse at fp32 level";
    EXPECT_TRUE(axonn::test::close_attention(e.dqkv, dqkv, {&mag.dqkv_of_d, &mag.dqkv}))
        << "dqkv (accumulated into the old values)";
  }
}

// The GPU tests' shapes of the tensor-core kernels: one query, whole and partial 64-row tiles, several
// tiles with the diagonal inside a tile, several heads and batch rows (the geometry), both head sizes.
TEST(MmaFlashAttention, OneQuery) { check_attention(1, 1, 1, 64, 21); }
TEST(MmaFlashAttention, OneWholeTile) { check_attention(1, 64, 2, 64, 22); }
TEST(MmaFlashAttention, PartialTileSeveralHeadsAndRows) { check_attention(2, 67, 2, 64, 1); }
TEST(MmaFlashAttention, FourTiles) { check_attention(1, 256, 1, 64, 23); }
TEST(MmaFlashAttention, HeadSize128) { check_attention(2, 130, 1, 128, 24); }
TEST(MmaFlashAttention, HeadSize128PartialTile) { check_attention(1, 100, 2, 128, 11); }

}  // namespace
