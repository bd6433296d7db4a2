// The Llama block's elementwise CUDA kernels by rows (kernels/cuda/llama_rows.cuh: SwiGLU forward and backward,
// rotate-half RoPE both ways), run on the CPU by the SIMT emulator against kernels::ref, fp32 and bf16, with the
// GPU kernel tests' bounds (tests/cuda/kernels: fp32 1e-6 absolute and 1e-5 relative, bf16 one bf16 ulp), launched
// as llama.cu launches them (the same blocks, threads and 16-byte-pack decision). Rows of whole packs and of a short
// last pack (also 16-byte aligned ones: fp32 rows of 12), shorter than a pack, more rows than blocks (a grid-stride
// loop over rows); buffers that are 16-byte aligned and buffers that are not; RoPE on the q heads of a q|k|v row
// (the model's stride) with head sizes whose half is whole packs or not, and on rows whose stride breaks the
// alignment. Nothing past the rotated heads or the rows is written (a read past them is ASan's to find: CI runs
// these tests under it).
#define AXONN_SIMT_EMULATOR 1
#include "simt_emulator.hpp"
//
#include "kernels/cuda/llama_rows.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "attention_bound.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
namespace cuda = axonn::kernels::cuda;
namespace lr = axonn::kernels::cuda::llama_rows;
namespace emu = axonn::emu;
using axonn::test::allclose;
using axonn::test::rand_bf;
using axonn::test::randn;
using axonn::test::widen;
using k::bf16;
using Vec = std::vector<float>;
using Bf = std::vector<bf16>;

namespace {

template <typename E>
std::vector<E> random_values(size_t n, uint32_t seed) {
  if constexpr (std::is_same_v<E, float>)
    return randn(n, seed);
  else
    return rand_bf(n, seed);
}

template <typename E>
::testing::AssertionResult close(const std::vector<E>& got, const std::vector<E>& want) {
  if constexpr (std::is_same_v<E, float>)
    return allclose(got, want, 1e-6f, 1e-5f);
  else
    return allclose(widen(got), widen(want), axonn::test::kBf16Abs, axonn::test::kBf16Ulp);
}

template <typename E>
const k::OpTable<E>& ref() {
  if constexpr (std::is_same_v<E, float>)
    return k::ops_for(k::Backend::kRef);
  else
    return k::ref_bf16_ops();
}

// The launch llama.cu makes, or `blocks` blocks when given (fewer than the rows: the grid-stride loop).
unsigned blocks_for(int64_t rows, unsigned blocks) { return blocks ? blocks : cuda::detail::row_grid(rows); }

// SwiGLU over N rows of F, the buffers `offset` elements into their vectors (1: not 16-byte aligned).
template <typename E>
void check_swiglu(int64_t N, int F, int offset, unsigned blocks) {
  SCOPED_TRACE(::testing::Message() << "N=" << N << " F=" << F << " offset=" << offset << " blocks=" << blocks);
  const auto o = static_cast<size_t>(offset);
  std::vector<E> inp = random_values<E>(o + N * 2 * F, 1), dout = random_values<E>(o + N * F + 1, 2);
  std::vector<E> out(o + N * F + 1, E{0}), dinp = random_values<E>(o + N * 2 * F + 1, 3);
  const E guard = dout.back();
  out.back() = guard;
  std::vector<E> want_out(N * F), want_dinp(dinp.begin() + offset, dinp.end() - 1);
  const std::vector<E> x(inp.begin() + offset, inp.end()), dy(dout.begin() + offset, dout.end() - 1);
  ref<E>().swiglu_forward(want_out.data(), x.data(), N, F);
  ref<E>().swiglu_backward(want_dinp.data(), x.data(), dy.data(), N, F);
  E *pout = out.data() + offset, *pdinp = dinp.data() + offset;
  const E *pinp = inp.data() + offset, *pdout = dout.data() + offset;
  emu::launch(dim3(blocks_for(N, blocks)), dim3(lr::kThreads), 0, [&] {
    lr::swiglu_forward_kernel<E>(pout, pinp, N, F, cuda::detail::rows_aligned16<E>(F, {pout, pinp}));
  });
  emu::launch(dim3(blocks_for(N, blocks)), dim3(lr::kThreads), 0, [&] {
    lr::swiglu_backward_kernel<E>(pdinp, pinp, pdout, N, F, cuda::detail::rows_aligned16<E>(F, {pdinp, pinp, pdout}));
  });
  EXPECT_TRUE(close(std::vector<E>(out.begin() + offset, out.end() - 1), want_out)) << "swiglu_forward";
  EXPECT_TRUE(close(std::vector<E>(dinp.begin() + offset, dinp.end() - 1), want_dinp)) << "swiglu_backward";
  EXPECT_EQ(out.back(), guard) << "wrote past the output";
}

TEST(EmuLlamaRows, SwiGluEqualsTheReference) {
  for (const auto& [N, F] : {std::pair<int64_t, int>{5, 1040}, {3, 13}, {70, 24}, {2, 5}, {4, 12}})
    for (const int offset : {0, 1})
      for (const unsigned blocks : {0u, 2u}) {
        check_swiglu<float>(N, F, offset, blocks);
        check_swiglu<bf16>(N, F, offset, blocks);
      }
}

// RoPE forward then backward on B x T rows of `stride` elements whose first `heads` heads of HS rotate (the
// model's q and k in a q|k|v row): each against the reference, the other heads and columns untouched.
template <typename E>
void check_rope(int T, int heads, int HS, int stride, int offset, unsigned blocks) {
  SCOPED_TRACE(::testing::Message() << "T=" << T << " heads=" << heads << " HS=" << HS << " stride=" << stride
                                    << " offset=" << offset << " blocks=" << blocks);
  const int B = 3, half = HS / 2;
  const int64_t rows = static_cast<int64_t>(B) * T;
  Vec cos(static_cast<size_t>(T) * half), sin(cos.size());
  for (size_t i = 0; i < cos.size(); i++) {
    cos[i] = std::cos(0.37f * static_cast<float>(i));
    sin[i] = std::sin(0.37f * static_cast<float>(i));
  }
  std::vector<E> x = random_values<E>(static_cast<size_t>(offset + rows * stride), 4);
  std::vector<E> want(x.begin() + offset, x.end());
  const std::vector<E> before = want;
  E* px = x.data() + offset;
  const bool vec = lr::rope_aligned(px, cos.data(), sin.data(), HS, stride);
  for (const float sign : {1.0f, -1.0f}) {
    if (sign > 0)
      ref<E>().rope_forward(want.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    else
      ref<E>().rope_backward(want.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
    emu::launch(dim3(blocks_for(rows, blocks)), dim3(lr::kThreads), 0,
                [&] { lr::rope_kernel<E>(px, cos.data(), sin.data(), rows, T, heads, HS, stride, sign, vec); });
    const std::vector<E> got(x.begin() + offset, x.end());
    EXPECT_TRUE(close(got, want)) << (sign > 0 ? "rope_forward" : "rope_backward");
    for (int64_t r = 0; r < rows; r++)
      for (int c = heads * HS; c < stride; c++)
        ASSERT_EQ(got[r * stride + c], before[r * stride + c]) << "row " << r << ", column " << c << " changed";
  }
}

TEST(EmuLlamaRows, RopeEqualsTheReference) {
  for (const int HS : {64, 128, 12, 8})
    for (const unsigned blocks : {0u, 2u}) {
      const int heads = 3;
      check_rope<float>(5, heads, HS, 3 * heads * HS, 0, blocks);  // q | k | v, q's heads rotate
      check_rope<bf16>(5, heads, HS, 3 * heads * HS, 0, blocks);
      check_rope<float>(5, heads, HS, heads * HS + 3, 1, blocks);  // rows that break the alignment
      check_rope<bf16>(5, heads, HS, heads * HS + 3, 1, blocks);
    }
}

}  // namespace
