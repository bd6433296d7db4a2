// The fused AdamW update's CUDA kernel (kernels/cuda/adamw.cuh: packs of 8 elements, 16-byte loads and stores
// where every array is aligned) run on the CPU by the SIMT emulator against kernels::ref's update, with the
// CUDA kernel tests' bounds (tests/cuda/kernels/test_cuda_kernels.cpp), over several steps: the fp32 table's
// (no copy) and the bf16 table's (the master's bf16 copy written in the same pass, which must be the rounding
// of the master it wrote, bit for bit). Lengths with a short last pack and shorter than a pack; arrays that are
// 16-byte aligned (whole packs) and arrays that are not (element by element); the grid adamw.cu launches and a
// small one whose threads stride over many packs. Nothing is written past the arrays.
#define AXONN_SIMT_EMULATOR 1
#include "simt_emulator.hpp"
//
#include "kernels/cuda/adamw.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/ops.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
namespace cuda = axonn::kernels::cuda;
namespace emu = axonn::emu;
using axonn::test::allclose;
using axonn::test::randn;
using Vec = std::vector<float>;

namespace {

constexpr float kLr = 1e-3f, kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f, kDecay = 0.1f, kGradScale = 0.5f;
constexpr float kGuard = 12345.0f;

// Arrays of n elements starting `offset` floats into buffers with a guard element after them.
struct Arrays {
  Vec p, g, m, v;
  std::vector<k::bf16> copy;
  int offset;
  Arrays(int64_t n, int off) : offset(off) {
    const auto size = static_cast<size_t>(n + off + 1);
    p = randn(size, 1), g = randn(size, 2), m = Vec(size, 0.0f), v = Vec(size, 0.0f);
    copy.assign(size, 0x7fc1);
    p[n + off] = g[n + off] = m[n + off] = v[n + off] = kGuard;
  }
};

// One step on the emulator, as adamw.cu's adamw_launch makes it (its step's settings, its 16-byte-pack decision);
// `blocks`, `threads`: the launch (0 blocks: launch_packs' own, pack_grid with kPackThreads).
void emulated_step(Arrays& a, int64_t n, bool with_copy, int t, unsigned blocks, unsigned threads) {
  const int o = a.offset;
  const cuda::adamw::Packs update{a.p.data() + o, with_copy ? a.copy.data() + o : nullptr, a.m.data() + o,
                                  a.v.data() + o, a.g.data() + o,
                                  cuda::adamw::step_of(kLr, kBeta1, kBeta2, kEps, kDecay, kGradScale, t)};
  const dim3 grid(blocks ? blocks : cuda::detail::pack_grid(n));
  emu::launch(grid, dim3(threads), 0, [&] { cuda::detail::pack_kernel(update, n, update.aligned()); });
}

Vec slice(const Vec& x, int off, int64_t n) { return Vec(x.begin() + off, x.begin() + off + n); }

void check_update(int64_t n, int offset, bool with_copy, unsigned blocks, unsigned threads) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset << " copy=" << with_copy
                                    << " blocks=" << blocks << " threads=" << threads);
  Arrays emu_arrays(n, offset);
  Vec p = slice(emu_arrays.p, offset, n), g = slice(emu_arrays.g, offset, n), m(n, 0.0f), v(n, 0.0f);
  for (int t = 1; t <= 3; t++) {
    k::ref::adamw_update(p.data(), nullptr, m.data(), v.data(), g.data(), n, kLr, kBeta1, kBeta2, kEps, kDecay,
                         kGradScale, t);
    emulated_step(emu_arrays, n, with_copy, t, blocks, threads);
  }
  EXPECT_TRUE(allclose(slice(emu_arrays.p, offset, n), p, 1e-6f, 1e-5f)) << "weights";
  EXPECT_TRUE(allclose(slice(emu_arrays.m, offset, n), m, 1e-7f, 1e-5f)) << "first moment";
  EXPECT_TRUE(allclose(slice(emu_arrays.v, offset, n), v, 1e-9f, 1e-5f)) << "second moment";
  for (int64_t i = 0; i < n; i++) {
    const k::bf16 want = with_copy ? axonn::f32_to_bf16(emu_arrays.p[offset + i]) : k::bf16{0x7fc1};
    ASSERT_EQ(emu_arrays.copy[offset + i], want) << "the bf16 copy of element " << i;
  }
  const auto end = static_cast<size_t>(n + offset);
  EXPECT_EQ(emu_arrays.p[end], kGuard) << "wrote past the weights";
  EXPECT_EQ(emu_arrays.m[end], kGuard) << "wrote past m";
  EXPECT_EQ(emu_arrays.v[end], kGuard) << "wrote past v";
  EXPECT_EQ(emu_arrays.copy[end], k::bf16{0x7fc1}) << "wrote past the copy";
}

TEST(EmuAdamW, EqualsTheReferenceInPacksAndElementByElement) {
  for (const int64_t n : {int64_t{1003}, int64_t{64}, int64_t{5}})
    for (const int offset : {0, 1})  // 16-byte aligned, or not: whole packs, or element by element
      for (const bool with_copy : {false, true}) {
        check_update(n, offset, with_copy, 0, cuda::detail::kPackThreads);  // adamw.cu's launch
        check_update(n, offset, with_copy, 2, 32);   // threads striding over many packs
      }
}

}  // namespace
