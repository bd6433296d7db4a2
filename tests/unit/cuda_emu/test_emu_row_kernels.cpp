// The memory-bound CUDA kernels of the norms, the cross-entropy and the bias fill, run on the CPU by the SIMT
// emulator: LayerNorm's and RMSNorm's row kernels (norm_rows.cuh) with their parameter gradients
// (columns.cuh), the softmax + cross-entropy kernels (crossentropy_rows.cuh), and packs.cuh's row fill (the bf16
// linear layer's bias). Each op is launched as its .cu launches it (the same grid, block and 16-byte-pack
// decision, rows_aligned16) and stands in for the CUDA table's op in a copy of the reference table, so the
// kernel tests' own steps (row_steps.hpp) and bounds (tests/cuda/kernels: fp32 within 1e-5, bf16 within one
// bf16 ulp) compare it with kernels::ref, fp32 and bf16. The shapes take both pack paths: rows whose bytes are
// a multiple of 16 (whole packs, 16-byte loads) and rows that are not (a short last pack, element by element),
// rows shorter than a pack, more rows than a column chunk (256), a vocabulary longer than a block (512).
#include "emulated_ops.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_bound.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "row_steps.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
namespace cuda = axonn::kernels::cuda;
namespace emu = axonn::emu;
using axonn::test::allclose;
using axonn::test::crossentropy_rows;
using axonn::test::crossentropy_rows_gradient;
using axonn::test::layernorm_rows_backward;
using axonn::test::layernorm_steps;
using axonn::test::rand_bf;
using axonn::test::randint;
using axonn::test::randn;
using axonn::test::widen;
using k::bf16;
using Vec = std::vector<float>;
using Bf = std::vector<bf16>;

namespace {

namespace norm = cuda::norm_rows;
namespace ce = cuda::crossentropy_rows;
using axonn::test::emulated::column_sums;
using axonn::test::emulated::Emulated;
using axonn::test::emulated::launch;
using cuda::detail::rows_aligned16;

const k::Ops& ref32() { return k::ops_for(k::Backend::kRef); }
const k::OpsBf16& ref16() { return k::ref_bf16_ops(); }

// bf16 results within one bf16 ulp (+ kBf16Abs) of the oracle's, as the GPU tests.
::testing::AssertionResult close_bf16(const Bf& got, const Bf& want) {
  return allclose(widen(got), widen(want), axonn::test::kBf16Abs, axonn::test::kBf16Ulp);
}

// The model's all-reduce between the steps (row_steps.hpp's `complete`) over a group of `ranks` ranks that hold
// identical channels, as the GPU tests' TwoRankGroup: a sum multiplies each value by the ranks, a max keeps it, and
// a row is ranks * C channels long (C_total). One rank: nothing to complete.
struct IdenticalRanks {
  int ranks;
  void operator()(float* values, int64_t n, bool max) const {
    if (!max)
      for (int64_t i = 0; i < n; i++) values[i] *= static_cast<float>(ranks);
  }
};

struct Rows {
  int64_t N;
  int C;
};
void PrintTo(const Rows& r, std::ostream* os) { *os << "N=" << r.N << " C=" << r.C; }
// C = 12: fp32 rows of 48 bytes (whole packs), bf16 rows of 24 (not); 37: neither; 200: both, with rows longer
// than a warp's round of packs (256 elements); 3: shorter than a pack; N = 300: more rows than a column chunk.
const Rows kRows[] = {{21, 12}, {9, 37}, {67, 200}, {5, 3}, {300, 40}, {70, 300}};

struct Vocab {
  int64_t N;
  int V, Vp;
};
void PrintTo(const Vocab& v, std::ostream* os) { *os << "N=" << v.N << " V=" << v.V << " Vp=" << v.Vp; }
// Vp = 40: whole packs in both types; 1024: longer than a block's round of packs (512 threads x 8); 1003: no
// whole-pack rows, a short last pack
const Vocab kVocabs[] = {{21, 37, 40}, {5, 1003, 1024}, {4, 1003, 1003}};

class EmuNorms : public ::testing::TestWithParam<std::tuple<Rows, emu::Schedule>> {
 protected:
  void SetUp() override { axonn::test::emulated::schedule() = std::get<1>(GetParam()); }
  int64_t N() const { return std::get<0>(GetParam()).N; }
  int C() const { return std::get<0>(GetParam()).C; }
};
class EmuCrossEntropy : public ::testing::TestWithParam<std::tuple<Vocab, emu::Schedule>> {
 protected:
  void SetUp() override { axonn::test::emulated::schedule() = std::get<1>(GetParam()); }
};

}  // namespace

TEST_P(EmuNorms, LayerNormFp32) {
  const int64_t N = this->N();
  const int C = this->C();
  const k::Ops emu_ops = Emulated<float>::table(ref32());
  Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
  for (auto& v : x) v += 3.0f;  // an offset mean, where one-pass variance would lose digits
  for (const int ranks : {1, 2}) {  // whole rows, and rows of which this rank holds half (C_total = 2C)
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    const IdenticalRanks group{ranks};
    Vec out(N * C), mean(N), rstd(N), e_out(N * C), e_mean(N), e_rstd(N);
    layernorm_steps(ref32(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, ranks * C,
                    group);
    layernorm_steps(emu_ops, e_out.data(), e_mean.data(), e_rstd.data(), x.data(), w.data(), b.data(), N, C,
                    ranks * C, group);
    EXPECT_TRUE(allclose(e_out, out, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(e_mean, mean, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(e_rstd, rstd, 1e-5f, 1e-5f));
    Vec dx(N * C, 0.1f), dw(C, 0.2f), db(C, 0.3f);  // backward accumulates
    Vec e_dx = dx, e_dw = dw, e_db = db;
    layernorm_rows_backward(ref32(), dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C, ranks * C, group);
    layernorm_rows_backward(emu_ops, e_dx.data(), e_dw.data(), e_db.data(), dy.data(), x.data(), w.data(),
                            e_mean.data(), e_rstd.data(), N, C, ranks * C, group);
    EXPECT_TRUE(allclose(e_dx, dx, 1e-4f, 1e-4f));
    EXPECT_TRUE(allclose(e_dw, dw, 1e-3f, 1e-4f));
    EXPECT_TRUE(allclose(e_db, db, 1e-3f, 1e-4f));
  }
}

TEST_P(EmuNorms, LayerNormBf16) {
  const int64_t N = this->N();
  const int C = this->C();
  const k::OpsBf16 emu_ops = Emulated<bf16>::table(ref16());
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), b = rand_bf(C, 3), dy = rand_bf(N * C, 4), d0 = rand_bf(N * C, 5);
  for (const int ranks : {1, 2}) {  // whole rows, and rows of which this rank holds half (C_total = 2C)
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    const IdenticalRanks group{ranks};
    Bf out(N * C), e_out(N * C);
    Vec mean(N), rstd(N), e_mean(N), e_rstd(N);
    layernorm_steps(ref16(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, ranks * C,
                    group);
    layernorm_steps(emu_ops, e_out.data(), e_mean.data(), e_rstd.data(), x.data(), w.data(), b.data(), N, C,
                    ranks * C, group);
    EXPECT_TRUE(close_bf16(e_out, out));
    EXPECT_TRUE(allclose(e_mean, mean, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(e_rstd, rstd, 1e-5f, 1e-5f));
    Bf dinp = d0, e_dinp = d0;
    Vec dw(C, 0.5f), db(C, -0.5f), e_dw = dw, e_db = db;
    layernorm_rows_backward(ref16(), dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                            rstd.data(), N, C, ranks * C, group);
    layernorm_rows_backward(emu_ops, e_dinp.data(), e_dw.data(), e_db.data(), dy.data(), x.data(), w.data(),
                            e_mean.data(), e_rstd.data(), N, C, ranks * C, group);
    EXPECT_TRUE(close_bf16(e_dinp, dinp));
    EXPECT_TRUE(allclose(e_dw, dw, 1e-3f, 1e-4f));
    EXPECT_TRUE(allclose(e_db, db, 1e-3f, 1e-4f));
  }
}

// RMSNorm in the model's steps (sum of squares; rstd in place; dot; input and weight gradients), fp32 then bf16,
// over whole rows and over rows of which this rank holds half (IdenticalRanks).
template <typename E, typename Rand, typename Close>
void check_rmsnorm(const k::OpTable<E>& ref, int64_t N, int C, Rand rand, Close close) {
  const k::OpTable<E> emu_ops = Emulated<E>::table(ref);
  const std::vector<E> x = rand(N * C, 1, 2.0f), w = rand(C, 2, 1.0f), dy = rand(N * C, 3, 1.0f),
                       d0 = rand(N * C, 4, 1.0f);
  for (const int ranks : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    const IdenticalRanks group{ranks};
    const int C_total = ranks * C;
    std::vector<E> out(N * C), e_out(N * C), dinp = d0, e_dinp = d0;
    Vec ss(N), e_ss(N), dot(N), e_dot(N), dw(C, 0.5f), e_dw = dw;
    ref.rmsnorm_sumsq(ss.data(), x.data(), N, C);
    emu_ops.rmsnorm_sumsq(e_ss.data(), x.data(), N, C);
    EXPECT_TRUE(allclose(e_ss, ss, 1e-4f, 1e-5f)) << "sum of squares";
    group(ss.data(), N, false);
    group(e_ss.data(), N, false);
    ref.rmsnorm_forward(out.data(), ss.data(), x.data(), w.data(), N, C, C_total, 1e-5f);  // ss becomes rstd
    emu_ops.rmsnorm_forward(e_out.data(), e_ss.data(), x.data(), w.data(), N, C, C_total, 1e-5f);
    EXPECT_TRUE(allclose(e_ss, ss, 1e-6f, 1e-5f)) << "rstd";
    EXPECT_TRUE(close(e_out, out)) << "forward";
    ref.rmsnorm_backward_dot(dot.data(), dy.data(), x.data(), w.data(), N, C);
    emu_ops.rmsnorm_backward_dot(e_dot.data(), dy.data(), x.data(), w.data(), N, C);
    EXPECT_TRUE(allclose(e_dot, dot, 1e-4f, 1e-4f)) << "dot";
    group(dot.data(), N, false);
    group(e_dot.data(), N, false);
    ref.rmsnorm_backward(dinp.data(), dw.data(), dy.data(), x.data(), w.data(), ss.data(), dot.data(), N, C, C_total);
    emu_ops.rmsnorm_backward(e_dinp.data(), e_dw.data(), dy.data(), x.data(), w.data(), e_ss.data(), e_dot.data(), N,
                             C, C_total);
    EXPECT_TRUE(close(e_dinp, dinp)) << "input gradient";
    EXPECT_TRUE(allclose(e_dw, dw, 1e-3f, 1e-4f)) << "weight gradient";
  }
}

TEST_P(EmuNorms, RmsNormFp32) {
  check_rmsnorm<float>(ref32(), N(), C(), [](size_t n, uint32_t seed, float scale) { return randn(n, seed, scale); },
                       [](const Vec& got, const Vec& want) { return allclose(got, want, 1e-4f, 1e-4f); });
}
TEST_P(EmuNorms, RmsNormBf16) {
  check_rmsnorm<bf16>(ref16(), N(), C(), [](size_t n, uint32_t seed, float scale) { return rand_bf(n, seed, scale); },
                      close_bf16);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmuNorms,
                         ::testing::Combine(::testing::ValuesIn(kRows),
                                            ::testing::Values(emu::Schedule::kLowestFirst,
                                                              emu::Schedule::kHighestFirst)));

// The cross-entropy over the whole vocabulary and over the slice [9, Vp) (a rank's share: targets below 9 are
// not held), forward in its steps, in place as the model calls it; backward accumulating and in place, without
// and with per-token weights (the Goldfish mask); the loss and gradient in one pass, bit for bit the forward and
// the backward in place, and over a group of two ranks.
template <typename E, typename Rand, typename Close>
void check_crossentropy(const k::OpTable<E>& ref, const std::vector<E>& z, int64_t N, int V, int Vp, Rand rand,
                        Close close) {
  const k::OpTable<E> emu_ops = Emulated<E>::table(ref);
  const auto targets = randint(N, V, 2);
  for (auto [begin, width] : {std::pair{0, Vp}, std::pair{9, Vp - 9}}) {
    const int valid = V - begin;
    std::vector<E> zs;
    for (int64_t n = 0; n < N; n++) zs.insert(zs.end(), z.begin() + n * Vp + begin, z.begin() + n * Vp + begin + width);
    Vec loss(N), e_loss(N);
    std::vector<E> probs(N * width), e_probs = zs;
    crossentropy_rows(ref, loss.data(), probs.data(), zs.data(), targets.data(), N, valid, width, begin);
    crossentropy_rows(emu_ops, e_loss.data(), e_probs.data(), e_probs.data(), targets.data(), N, valid, width, begin);
    EXPECT_TRUE(allclose(e_loss, loss, 1e-5f, 1e-5f)) << "losses, slice at " << begin;
    EXPECT_TRUE(close(e_probs, probs)) << "probabilities in place, slice at " << begin;
    Vec mask(N, 1.0f);
    for (int64_t n = 1; n < N; n += 3) mask[n] = 0.0f;
    for (bool weighted : {false, true}) {
      const float* w = weighted ? mask.data() : nullptr;
      std::vector<E> d = rand(N * width, 3), e_d = d;
      ref.softmax_crossentropy_backward(d.data(), probs.data(), targets.data(), w, 0.25f, N, valid, width, begin);
      emu_ops.softmax_crossentropy_backward(e_d.data(), probs.data(), targets.data(), w, 0.25f, N, valid, width,
                                            begin);
      EXPECT_TRUE(close(e_d, d)) << "accumulating, slice at " << begin << (weighted ? ", weighted" : "");
      std::vector<E> q = probs, e_q = probs;
      ref.softmax_crossentropy_backward(q.data(), q.data(), targets.data(), w, 0.25f, N, valid, width, begin);
      emu_ops.softmax_crossentropy_backward(e_q.data(), e_q.data(), targets.data(), w, 0.25f, N, valid, width, begin);
      EXPECT_TRUE(close(e_q, q)) << "in place, slice at " << begin << (weighted ? ", weighted" : "");
      // the loss and the gradient in one pass, in place over the logits as the model calls it: the two steps'
      // bits on the emulated kernels, and the oracle's within the bounds
      std::vector<E> two_steps = e_probs;
      emu_ops.softmax_crossentropy_backward(two_steps.data(), two_steps.data(), targets.data(), w, 0.25f, N, valid,
                                            width, begin);
      Vec f_loss(N);
      std::vector<E> f_d = zs;
      crossentropy_rows_gradient(emu_ops, f_loss.data(), f_d.data(), f_d.data(), targets.data(), w, 0.25f, N, valid,
                                 width, begin);
      EXPECT_EQ(f_loss, e_loss) << "one-pass losses, slice at " << begin;
      EXPECT_EQ(f_d, two_steps) << "one-pass gradient against the two steps, slice at " << begin
                          << (weighted ? ", weighted" : "");
      EXPECT_TRUE(close(f_d, q)) << "one-pass gradient, slice at " << begin << (weighted ? ", weighted" : "");
      // and over a group of two ranks holding identical slices (the sums doubled between the steps)
      Vec g_loss(N), e_g_loss(N);
      std::vector<E> g_d = zs, e_g_d = zs;
      crossentropy_rows_gradient(ref, g_loss.data(), g_d.data(), g_d.data(), targets.data(), w, 0.25f, N, valid, width,
                                 begin, IdenticalRanks{2});
      crossentropy_rows_gradient(emu_ops, e_g_loss.data(), e_g_d.data(), e_g_d.data(), targets.data(), w, 0.25f, N,
                                 valid, width, begin, IdenticalRanks{2});
      EXPECT_TRUE(allclose(e_g_loss, g_loss, 1e-5f, 1e-5f)) << "one pass over two ranks, slice at " << begin;
      EXPECT_TRUE(close(e_g_d, g_d)) << "one pass over two ranks, slice at " << begin;
    }
  }
}

TEST_P(EmuCrossEntropy, Fp32) {
  const auto [N, V, Vp] = std::get<0>(GetParam());
  Vec z = randn(N * Vp, 1, 3.0f);
  for (int64_t n = 0; n < N; n++)
    for (int i = V; i < Vp; i++) z[n * Vp + i] = 100.0f;  // padded logits must not matter
  check_crossentropy<float>(ref32(), z, N, V, Vp, [](size_t n, uint32_t seed) { return randn(n, seed, 0.5f); },
                            [](const Vec& got, const Vec& want) { return allclose(got, want, 1e-7f, 1e-5f); });
}
TEST_P(EmuCrossEntropy, Bf16) {
  const auto [N, V, Vp] = std::get<0>(GetParam());
  check_crossentropy<bf16>(ref16(), rand_bf(N * Vp, 1, 3.0f), N, V, Vp,
                           [](size_t n, uint32_t seed) { return rand_bf(n, seed, 0.5f); }, close_bf16);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmuCrossEntropy,
                         ::testing::Combine(::testing::ValuesIn(kVocabs),
                                            ::testing::Values(emu::Schedule::kLowestFirst,
                                                              emu::Schedule::kHighestFirst)));

// packs.cuh's row fill, as fill_rows launches it for the linear layers' bias (a block per row up to 65536 blocks,
// then a grid-stride loop over the rows; here 5 rows on 5 blocks and on 2): every row a copy of the bias, or
// zeros without one; bit for bit, whole packs or not, and nothing written past the rows. fp32 and bf16.
template <typename E>
void check_row_fill(const std::vector<E>& bias_values, E pattern) {
  const int64_t N = 5;
  const int OC = static_cast<int>(bias_values.size());
  for (const unsigned blocks : {5u, 2u})
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "OC=" << OC << " blocks=" << blocks << " bias=" << with_bias);
      std::vector<E> out(N * OC + 2, pattern);  // two guard elements past the end
      launch(dim3(blocks), dim3(cuda::detail::kRowFillThreads), [&] {
        cuda::detail::fill_rows_kernel<E>(out.data(), with_bias ? bias_values.data() : nullptr, N, OC,
                                          rows_aligned16<E>(OC, {out.data(), bias_values.data()}));
      });
      for (int64_t n = 0; n < N; n++)
        for (int c = 0; c < OC; c++) ASSERT_EQ(out[n * OC + c], with_bias ? bias_values[c] : E{0}) << n << ", " << c;
      EXPECT_EQ(out[N * OC], pattern) << "wrote past the rows";
      EXPECT_EQ(out[N * OC + 1], pattern) << "wrote past the rows";
    }
}

TEST(EmuRowFill, EveryRowIsTheBiasOrZeros) {
  for (const int OC : {24, 77, 3, 1040}) {
    check_row_fill<bf16>(rand_bf(OC, 1), 0x7fc1);  // a NaN pattern
    check_row_fill<float>(randn(OC, 1), 12345.0f);
  }
}

// A 16-byte access at an address that is not 16-byte aligned faults on the GPU; the emulator fails the launch
// the same way (here a row fill told that rows starting 2 bytes into a buffer are aligned), where the host's
// own loads would quietly work.
TEST(EmuRowFill, AMisalignedPackFailsTheLaunchAsOnTheGpu) {
  Bf out(2 * 16 + 1), bias(16);
  try {
    launch(dim3(1), dim3(cuda::detail::kRowFillThreads),
           [&] { cuda::detail::fill_rows_kernel<bf16>(out.data() + 1, bias.data(), 2, 16, /*vec=*/true); });
    ADD_FAILURE() << "the misaligned stores ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("misaligned 16-byte"), std::string::npos) << e.what();
  }
}

// columns.cuh's sums down the rows (the linear layers' bias gradient), as column_sums_accumulate launches them:
// blocks of 32 packs of 8 columns across and 8 threads down a chunk of 64 rows, one atomic per column and block,
// added to dst. Rows of whole packs and not, shorter than a pack, wider than a block (256 columns), longer than
// a chunk.
TEST(EmuColumnSums, BiasGradientEqualsTheSumOfTheRows) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int>{3, 5}, {300, 40}, {600, 33}, {70, 600}, {130, 264}})
    for (const bool bf : {false, true}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << cols << (bf ? " bf16" : " fp32"));
      const Vec src32 = randn(rows * cols, 7);
      const Bf src16 = axonn::test::to_bf(src32);
      const Vec src = bf ? widen(src16) : src32;
      Vec want(cols, 0.25f), got(cols, 0.25f);
      for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) want[c] += src[r * cols + c];
      if (bf)
        column_sums<1>({{got.data()}}, cuda::detail::ElementTerms<bf16>{src16.data(), cols}, rows, cols,
                       rows_aligned16<bf16>(cols, {src16.data()}));
      else
        column_sums<1>({{got.data()}}, cuda::detail::ElementTerms<float>{src32.data(), cols}, rows, cols,
                       rows_aligned16<float>(cols, {src32.data()}));
      EXPECT_TRUE(allclose(got, want, 1e-4f, 1e-5f));
    }
}
