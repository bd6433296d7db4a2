// Every CUDA kernel against the naive `ref` one, on awkward shapes: copy the inputs to the device,
// run, copy back, compare. Without a CUDA device every test here is SKIPPED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/kernels/cuda.hpp"
#include "axonn/kernels/ops.hpp"
#include "gpu_test.hpp"
#include "kv_cache_cases.hpp"
#include "row_steps.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::crossentropy_rows;
using axonn::test::crossentropy_gradient_steps;
using axonn::test::crossentropy_steps;
using axonn::test::layernorm_backward_steps;
using axonn::test::layernorm_steps;
using axonn::test::DeviceArray;
using axonn::test::randint;
using axonn::test::randn;
using Vec = std::vector<float>;
using Dev = DeviceArray<float>;
using IDev = DeviceArray<int>;

namespace {

// Shapes that are multiples of nothing nice; the second crosses the block sizes of the kernels
// (rows longer than a warp, more rows than a column-reduction chunk, a vocabulary longer than a block).
struct Shape {
  int B, T, C, NH, V, Vp, OC;
  int64_t N() const { return static_cast<int64_t>(B) * T; }
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " V=" << s.V << " Vp=" << s.Vp
      << " OC=" << s.OC;
}
const Shape kShapes[] = {{3, 7, 12, 3, 37, 40, 10}, {5, 67, 200, 5, 1003, 1024, 77}};

class CudaKernels : public ::testing::TestWithParam<Shape> {};

}  // namespace

TEST(CudaOps, TableHoldsTheCudaFunctions) {
  // No device needed: this checks what was linked.
  EXPECT_EQ(k::cuda_ops().matmul_forward, &k::cuda::matmul_forward);
  EXPECT_EQ(k::cuda_ops().attention_backward, &k::cuda::attention_backward);
  EXPECT_EQ(k::cuda_ops().sum_squares, &k::cuda::sum_squares);
  EXPECT_EQ(k::cuda_ops().kv_cache_append, &k::cuda::kv_cache_append);
  EXPECT_EQ(k::cuda_ops().attention_cached_forward, &k::cuda::attention_cached_forward);
}

TEST_P(CudaKernels, EmbeddingAndPosition) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  Vec wte = randn(Vp * C, 1), wpe = randn(T * C, 2), dout = randn(N * C, 3);
  auto inp = randint(N, V, 4);
  inp[1] = inp[2] = inp[0];  // repeated tokens: the scatter must accumulate
  IDev d_inp(inp);
  for (auto [begin, rows] : {std::pair{0, Vp}, std::pair{9, 11}}) {
    Vec ref(N * C);
    k::ref::embedding_forward(ref.data(), inp.data(), wte.data() + begin * C, begin, rows, N, C);
    Dev d_out(Vec(N * C, 7.0f)), d_wte(Vec(wte.begin() + begin * C, wte.begin() + (begin + rows) * C));
    k::cuda::embedding_forward(d_out.get(), d_inp.get(), d_wte.get(), begin, rows, N, C);
    EXPECT_TRUE(allclose(d_out.host(), ref, 0, 0)) << "rows [" << begin << ", " << begin + rows << ")";
    Vec dref(rows * C, 0.5f);
    Dev d_dwte(dref);
    k::ref::embedding_backward(dref.data(), dout.data(), inp.data(), begin, rows, N, C);
    Dev d_dout(dout);
    k::cuda::embedding_backward(d_dwte.get(), d_dout.get(), d_inp.get(), begin, rows, N, C);
    EXPECT_TRUE(allclose(d_dwte.host(), dref, 1e-5f, 1e-5f));
  }
  Vec p = randn(N * C, 5), dp(T * C, 0.25f);
  Dev d_p(p), d_dp(dp), d_wpe(wpe), d_dout(dout);
  k::ref::position_forward(p.data(), wpe.data(), B, T, C);
  k::cuda::position_forward(d_p.get(), d_wpe.get(), B, T, C);
  EXPECT_TRUE(allclose(d_p.host(), p, 0, 0));
  k::ref::position_backward(dp.data(), dout.data(), B, T, C);
  k::cuda::position_backward(d_dp.get(), d_dout.get(), B, T, C);
  EXPECT_TRUE(allclose(d_dp.host(), dp, 1e-5f, 1e-5f));
}

namespace {
// A group of two ranks that hold identical slices, as the model's all-reduce between the kernels' steps
// (row_steps.hpp's `complete`): the sum over the group doubles each value, the max keeps it. The CUDA
// kernels' row values must be device arrays (checked), the ref kernels' host arrays; both must then give the
// same results (the same steps, in the same order).
struct TwoRankGroup {
  bool device = false;
  int calls = 0;
  bool wrong_memory = false;
  void all_reduce(float* values, int64_t n, bool max) {
    calls++;
    std::vector<float> v(static_cast<size_t>(n));
    if (device) {
      cudaPointerAttributes attr{};
      if (n > 0 && (cudaPointerGetAttributes(&attr, values) != cudaSuccess || attr.type != cudaMemoryTypeDevice))
        wrong_memory = true;
      if (n > 0 && cudaMemcpy(v.data(), values, sizeof(float) * v.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
        wrong_memory = true;
    } else {
      v.assign(values, values + n);
    }
    if (!max)
      for (float& x : v) x *= 2.0f;
    if (device) {
      if (n > 0 && cudaMemcpy(values, v.data(), sizeof(float) * v.size(), cudaMemcpyHostToDevice) != cudaSuccess)
        wrong_memory = true;
    } else {
      std::copy(v.begin(), v.end(), values);
    }
  }
};
const k::Ops& ref_ops() { return k::ops_for(k::Backend::kRef); }
// The group as the steps' `complete`.
auto over(TwoRankGroup& group) {
  return [&group](float* values, int64_t n, bool max) { group.all_reduce(values, n, max); };
}
}  // namespace

TEST_P(CudaKernels, LayerNorm) {
  AXONN_REQUIRE_GPU();
  const int C = GetParam().C;
  const int64_t N = GetParam().N();
  Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
  for (auto& v : x) v += 3.0f;  // an offset mean, where one-pass variance would lose digits
  Vec out(N * C), mean(N), rstd(N);
  const k::Ops& ref = k::ops_for(k::Backend::kRef);
  layernorm_steps(ref, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C);
  Dev d_x(x), d_w(w), d_b(b), d_dy(dy), d_out(N * C), d_mean(N), d_rstd(N);
  layernorm_steps(k::cuda_ops(), d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_w.get(), d_b.get(), N,
                  C, C);
  EXPECT_TRUE(allclose(d_out.host(), out, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(d_mean.host(), mean, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(d_rstd.host(), rstd, 1e-5f, 1e-5f));
  Vec dx(N * C, 0.1f), dw(C, 0.2f), db(C, 0.3f);  // backward accumulates
  Dev d_dx(dx), d_dw(dw), d_db(db), d_sums(2 * N);
  Vec sums(2 * N);
  layernorm_backward_steps(ref, sums.data(), dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C, C);
  layernorm_backward_steps(k::cuda_ops(), d_sums.get(), d_dx.get(), d_dw.get(), d_db.get(), d_dy.get(),
                           d_x.get(), d_w.get(), d_mean.get(), d_rstd.get(), N, C, C);
  EXPECT_TRUE(allclose(d_dx.host(), dx, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));
  EXPECT_TRUE(allclose(d_db.host(), db, 1e-3f, 1e-4f));
}

TEST(CudaKernelsSharded, LayerNormOverAGroupOnDeviceArraysMatchesRef) {
  AXONN_REQUIRE_GPU();
  const int64_t N = 37;
  const int C = 45, C_total = 2 * C;
  Vec x = randn(N * C, 11), w = randn(C, 12), b = randn(C, 13), dy = randn(N * C, 14);
  TwoRankGroup host_r, dev_r;
  dev_r.device = true;
  const k::Ops& ref = k::ops_for(k::Backend::kRef);
  Vec out(N * C), mean(N), rstd(N);
  Dev d_x(x), d_w(w), d_b(b), d_dy(dy), d_out(N * C), d_mean(N), d_rstd(N);
  layernorm_steps(ref, out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C_total, over(host_r));
  layernorm_steps(k::cuda_ops(), d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_w.get(), d_b.get(), N,
                  C, C_total, over(dev_r));
  EXPECT_TRUE(allclose(d_out.host(), out, 1e-5f, 1e-4f));
  EXPECT_TRUE(allclose(d_mean.host(), mean, 1e-5f, 1e-4f));
  EXPECT_TRUE(allclose(d_rstd.host(), rstd, 1e-5f, 1e-4f));
  Vec dx(N * C, 0.1f), dw(C, 0.2f), db(C, 0.3f);
  Dev d_dx(dx), d_dw(dw), d_db(db), d_sums(2 * N);
  Vec sums(2 * N);
  layernorm_backward_steps(ref, sums.data(), dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C, C_total, over(host_r));
  layernorm_backward_steps(k::cuda_ops(), d_sums.get(), d_dx.get(), d_dw.get(), d_db.get(), d_dy.get(),
                           d_x.get(), d_w.get(), d_mean.get(), d_rstd.get(), N, C, C_total, over(dev_r));
  EXPECT_TRUE(allclose(d_dx.host(), dx, 1e-4f, 1e-4f));
  EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));
  EXPECT_TRUE(allclose(d_db.host(), db, 1e-3f, 1e-4f));
  EXPECT_EQ(dev_r.calls, host_r.calls);  // forward: mean, variance; backward: the two row sums
  EXPECT_EQ(dev_r.calls, 3);
  EXPECT_FALSE(dev_r.wrong_memory) << "the CUDA statistics must be device arrays";
}

TEST(CudaKernelsSharded, CrossEntropyOverAGroupOnDeviceArraysMatchesRef) {
  AXONN_REQUIRE_GPU();
  const int64_t N = 29;
  const int Vs = 70, Vvalid = 61, vocab_begin = 50;
  Vec logits = randn(N * Vs, 21);
  std::vector<int> targets = randint(N, 200, 22);  // ids in [0, 200): some in this slice [50, 111), most not
  TwoRankGroup host_r, dev_r;
  dev_r.device = true;
  Vec losses(N), probs(N * Vs), row_values(3 * N);
  Dev d_logits(logits), d_losses(N), d_row_values(3 * N);
  IDev d_tg(targets);
  crossentropy_steps(ref_ops(), row_values.data(), losses.data(), probs.data(), logits.data(), targets.data(), N,
                     Vvalid, Vs, vocab_begin, over(host_r));
  // in place, as the model calls it (probabilities over the logits)
  crossentropy_steps(k::cuda_ops(), d_row_values.get(), d_losses.get(), d_logits.get(), d_logits.get(), d_tg.get(), N,
                     Vvalid, Vs, vocab_begin, over(dev_r));
  EXPECT_TRUE(allclose(d_logits.host(), probs, 1e-6f, 1e-4f));
  EXPECT_TRUE(allclose(d_losses.host(), losses, 1e-5f, 1e-4f));
  EXPECT_EQ(dev_r.calls, 2);  // the max, then the sums and target logits
  EXPECT_EQ(host_r.calls, 2);
  EXPECT_TRUE(allclose(d_row_values.host(), row_values, 1e-6f, 1e-4f)) << "the row max, sums and target logits";
  EXPECT_FALSE(dev_r.wrong_memory) << "the CUDA row values must be device arrays";
}

TEST_P(CudaKernels, Matmul) {
  AXONN_REQUIRE_GPU();
  const int C = GetParam().C, OC = GetParam().OC;
  const int64_t N = GetParam().N();
  Vec x = randn(N * C, 1), w = randn(OC * C, 2), b = randn(OC, 3), dy = randn(N * OC, 4);
  Dev d_x(x), d_w(w), d_b(b), d_dy(dy), d_out(N * OC);
  for (const bool bias : {true, false}) {
    Vec out(N * OC);
    k::ref::matmul_forward(out.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
    k::cuda::matmul_forward(d_out.get(), d_x.get(), d_w.get(), bias ? d_b.get() : nullptr, N, C, OC);
    EXPECT_TRUE(allclose(d_out.host(), out, 1e-4f, 1e-4f)) << "bias " << bias;
  }
  for (const bool with_dinp_dbias : {true, false}) {
    Vec dx(N * C, 0.1f), dw(OC * C, 0.2f), db(OC, 0.3f);
    Dev d_dx(dx), d_dw(dw), d_db(db);
    k::ref::matmul_backward(with_dinp_dbias ? dx.data() : nullptr, dw.data(), with_dinp_dbias ? db.data() : nullptr,
                            dy.data(), x.data(), w.data(), N, C, OC);
    k::cuda::matmul_backward(with_dinp_dbias ? d_dx.get() : nullptr, d_dw.get(),
                             with_dinp_dbias ? d_db.get() : nullptr, d_dy.get(), d_x.get(), d_w.get(), N, C, OC);
    EXPECT_TRUE(allclose(d_dx.host(), dx, 1e-4f, 1e-4f));
    EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));
    EXPECT_TRUE(allclose(d_db.host(), db, 1e-3f, 1e-4f));
  }
  // split as the tensor-parallel linear calls it (dinp alone, then dweight and dbias): the same bits
  Vec dx(N * C, 0.1f), dw(OC * C, 0.2f), db(OC, 0.3f);
  Dev a_dx(dx), a_dw(dw), a_db(db), b_dx(dx), b_dw(dw), b_db(db);
  k::cuda::matmul_backward(a_dx.get(), a_dw.get(), a_db.get(), d_dy.get(), d_x.get(), d_w.get(), N, C, OC);
  k::cuda::matmul_backward(b_dx.get(), nullptr, nullptr, d_dy.get(), d_x.get(), d_w.get(), N, C, OC);
  k::cuda::matmul_backward(nullptr, b_dw.get(), b_db.get(), d_dy.get(), d_x.get(), d_w.get(), N, C, OC);
  EXPECT_EQ(a_dx.host(), b_dx.host());
  EXPECT_EQ(a_dw.host(), b_dw.host());
  EXPECT_EQ(a_db.host(), b_db.host());
}

TEST_P(CudaKernels, Attention) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  const size_t att_n = static_cast<size_t>(B) * NH * T * T;
  Vec qkv = randn(N * 3 * C, 1), dy = randn(N * C, 2);
  Vec out(N * C), att(att_n), scratch(att_n);
  k::ref::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  Dev d_qkv(qkv), d_dy(dy), d_out(N * C), d_att(Vec(att_n, 9.0f)), d_scratch(att_n);
  k::cuda::attention_forward(d_out.get(), d_att.get(), d_qkv.get(), B, T, C, NH);
  EXPECT_TRUE(allclose(d_out.host(), out, 1e-5f, 1e-4f));
  EXPECT_TRUE(allclose(d_att.host(), att, 1e-6f, 1e-4f));  // including the zeros above the diagonal
  Vec dqkv(N * 3 * C, 0.1f);
  Dev d_dqkv(dqkv);
  k::ref::attention_backward(dqkv.data(), scratch.data(), dy.data(), qkv.data(), nullptr, att.data(), B, T, C, NH);
  k::cuda::attention_backward(d_dqkv.get(), d_scratch.get(), d_dy.get(), d_qkv.get(), nullptr, d_att.get(), B, T, C, NH);
  EXPECT_TRUE(allclose(d_dqkv.host(), dqkv, 1e-4f, 1e-4f));
}

// The KV cache of inference: a prompt chunk, then positions one at a time (decode), appended and attended over
// on the device against ref on the host, on kv_cache_cases()'s shapes.
TEST(CudaKernelsKvCache, AppendAndAttendOverTheCacheMatchRef) {
  AXONN_REQUIRE_GPU();
  for (const axonn::test::KvCacheCase& c : axonn::test::kv_cache_cases()) {
    const int Q = c.NH * c.HS, K = c.NKV * c.HS, W = Q + 2 * K;
    const size_t cache = static_cast<size_t>(c.B) * c.Tc * K;
    Vec kc(cache, 7.0f), vc(cache, 7.0f);
    Dev d_kc(kc), d_vc(vc);
    int pos = 0;
    for (int n : c.chunks) {
      const Vec qkv = randn(static_cast<size_t>(c.B) * n * W, static_cast<uint32_t>(10 + pos));
      Vec out(static_cast<size_t>(c.B) * n * Q);
      k::ref::kv_cache_append(kc.data(), vc.data(), qkv.data(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS);
      k::ref::attention_cached_forward(out.data(), qkv.data(), kc.data(), vc.data(), c.B, n, pos, c.Tc, c.NH, c.NKV,
                                       c.HS);
      Dev d_qkv(qkv), d_out(Vec(out.size(), 9.0f));
      k::cuda::kv_cache_append(d_kc.get(), d_vc.get(), d_qkv.get(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS);
      k::cuda::attention_cached_forward(d_out.get(), d_qkv.get(), d_kc.get(), d_vc.get(), c.B, n, pos, c.Tc, c.NH,
                                        c.NKV, c.HS);
      const std::string what = c.describe(n, pos);
      EXPECT_TRUE(allclose(d_kc.host(), kc, 0, 0)) << what;  // copies: exact, and nothing else written
      EXPECT_TRUE(allclose(d_vc.host(), vc, 0, 0)) << what;
      EXPECT_TRUE(allclose(d_out.host(), out, 1e-5f, 1e-4f)) << what;
      pos += n;
    }
  }
}

TEST(CudaKernelsKvCache, PositionsBeyondTheCacheAreRefusedBeforeAnyLaunch) {
  // no device needed: the checks run first
  EXPECT_THROW(k::cuda::kv_cache_append(nullptr, nullptr, nullptr, 1, 4, 14, 16, 2, 2, 8), axonn::InvalidArgument);
  EXPECT_THROW(k::cuda::attention_cached_forward(nullptr, nullptr, nullptr, nullptr, 1, 1, 0, 16, 3, 2, 8),
               axonn::InvalidArgument);
}

TEST_P(CudaKernels, GeluAndResidual) {
  AXONN_REQUIRE_GPU();
  const int64_t n = GetParam().N() * GetParam().C;
  Vec x = randn(n, 1, 2.0f), dy = randn(n, 2), a = randn(n, 3), out(n);
  Dev d_x(x), d_dy(dy), d_a(a), d_out(n);
  k::ref::gelu_forward(out.data(), x.data(), n);
  k::cuda::gelu_forward(d_out.get(), d_x.get(), n);
  EXPECT_TRUE(allclose(d_out.host(), out, 1e-6f, 1e-5f));
  Vec dx(n, 0.1f);
  Dev d_dx(dx);
  k::ref::gelu_backward(dx.data(), x.data(), dy.data(), n);
  k::cuda::gelu_backward(d_dx.get(), d_x.get(), d_dy.get(), n);
  EXPECT_TRUE(allclose(d_dx.host(), dx, 1e-5f, 1e-5f));
  k::ref::residual_forward(out.data(), x.data(), a.data(), n);
  k::cuda::residual_forward(d_out.get(), d_x.get(), d_a.get(), n);
  EXPECT_TRUE(allclose(d_out.host(), out, 0, 0));
  Vec da(n, 1.0f), db(n, 2.0f);
  Dev d_da(da), d_db(db);
  k::ref::residual_backward(da.data(), db.data(), dy.data(), n);
  k::cuda::residual_backward(d_da.get(), d_db.get(), d_dy.get(), n);
  EXPECT_TRUE(allclose(d_da.host(), da, 0, 0));
  EXPECT_TRUE(allclose(d_db.host(), db, 0, 0));
}

TEST_P(CudaKernels, SoftmaxCrossEntropyOverTheWholeVocabularyAndASlice) {
  AXONN_REQUIRE_GPU();
  const int V = GetParam().V, Vp = GetParam().Vp;
  const int64_t N = GetParam().N();
  Vec z = randn(N * Vp, 1, 3.0f);
  for (int64_t n = 0; n < N; n++)
    for (int i = V; i < Vp; i++) z[n * Vp + i] = 100.0f;  // padded logits must not matter
  auto tg = randint(N, V, 2);
  IDev d_tg(tg);
  // The whole vocabulary, then the slice [9, Vp) of it: nothing completed over a group, so the slice's losses
  // are its own partial ones; the targets below 9 are not held there.
  for (auto [begin, width] : {std::pair{0, Vp}, std::pair{9, Vp - 9}}) {
    const int valid = V - begin;
    Vec zs;
    for (int64_t n = 0; n < N; n++) zs.insert(zs.end(), z.begin() + n * Vp + begin, z.begin() + n * Vp + begin + width);
    Vec loss(N), probs(N * width);
    crossentropy_rows(ref_ops(), loss.data(), probs.data(), zs.data(), tg.data(), N, valid, width, begin);
    Dev d_z(zs), d_loss(N), d_probs(N * width), d_row_values(3 * N);
    crossentropy_steps(k::cuda_ops(), d_row_values.get(), d_loss.get(), d_probs.get(), d_z.get(), d_tg.get(), N, valid,
                       width, begin);
    EXPECT_TRUE(allclose(d_loss.host(), loss, 1e-5f, 1e-5f)) << "slice at " << begin;
    EXPECT_TRUE(allclose(d_probs.host(), probs, 1e-7f, 1e-5f)) << "slice at " << begin;
    // probs aliasing the logits (the model's in-place use)
    crossentropy_steps(k::cuda_ops(), d_row_values.get(), d_loss.get(), d_z.get(), d_z.get(), d_tg.get(), N, valid,
                       width, begin);
    EXPECT_TRUE(allclose(d_loss.host(), loss, 1e-5f, 1e-5f)) << "in place, slice at " << begin;
    EXPECT_TRUE(allclose(d_z.host(), probs, 1e-7f, 1e-5f)) << "in place, slice at " << begin;
    // backward: accumulating, then in place; unweighted, then with per-token weights (the Goldfish mask)
    Vec mask(N, 1.0f);
    for (int64_t n = 1; n < N; n += 4) mask[n] = 0.0f;
    Dev d_mask(mask), d_probs_kept(probs);
    for (bool weighted : {false, true}) {
      const float* w = weighted ? mask.data() : nullptr;
      const float* d_w = weighted ? d_mask.get() : nullptr;
      Vec d(N * width, 0.5f);
      Dev d_d(d), d_q(probs);
      k::ref::softmax_crossentropy_backward(d.data(), probs.data(), tg.data(), w, 0.25f, N, valid, width, begin);
      k::cuda::softmax_crossentropy_backward(d_d.get(), d_probs_kept.get(), d_tg.get(), d_w, 0.25f, N, valid, width,
                                             begin);
      EXPECT_TRUE(allclose(d_d.host(), d, 1e-6f, 1e-6f)) << "slice at " << begin << (weighted ? ", weighted" : "");
      Vec q = probs;
      k::ref::softmax_crossentropy_backward(q.data(), q.data(), tg.data(), w, 0.25f, N, valid, width, begin);
      k::cuda::softmax_crossentropy_backward(d_q.get(), d_q.get(), d_tg.get(), d_w, 0.25f, N, valid, width, begin);
      EXPECT_TRUE(allclose(d_q.host(), q, 1e-7f, 1e-6f)) << "in place, slice at " << begin
                                                          << (weighted ? ", weighted" : "");
      // a training forward's losses and gradient in one pass over the logits, in place: the bits of the GPU's
      // two steps (its in-place forward above left its probabilities in d_z), and the oracle's within the bounds
      Dev d_one(zs), d_one_loss(N), d_one_rows(3 * N), d_two(d_z.host());
      crossentropy_gradient_steps(k::cuda_ops(), d_one_rows.get(), d_one_loss.get(), d_one.get(), d_one.get(),
                                  d_tg.get(), d_w, 0.25f, N, valid, width, begin);
      k::cuda::softmax_crossentropy_backward(d_two.get(), d_two.get(), d_tg.get(), d_w, 0.25f, N, valid, width, begin);
      EXPECT_EQ(d_one.host(), d_two.host()) << "one pass, slice at " << begin << (weighted ? ", weighted" : "");
      EXPECT_EQ(d_one_loss.host(), d_loss.host()) << "one pass, slice at " << begin;
      EXPECT_TRUE(allclose(d_one.host(), q, 1e-7f, 1e-6f)) << "one pass, slice at " << begin;
    }
  }
}

TEST_P(CudaKernels, AdamWAndSumSquares) {
  AXONN_REQUIRE_GPU();
  const int64_t n = GetParam().N() * GetParam().C + 3;
  Vec p = randn(n, 1), g = randn(n, 2), m(n, 0.0f), v(n, 0.0f);
  Dev d_p(p), d_g(g), d_m(m), d_v(v);
  for (int t = 1; t <= 5; t++) {
    k::ref::adamw_update(p.data(), nullptr, m.data(), v.data(), g.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
    k::cuda::adamw_update(d_p.get(), nullptr, d_m.get(), d_v.get(), d_g.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
  }
  EXPECT_TRUE(allclose(d_p.host(), p, 1e-6f, 1e-5f));
  EXPECT_TRUE(allclose(d_m.host(), m, 1e-7f, 1e-5f));
  EXPECT_TRUE(allclose(d_v.host(), v, 1e-9f, 1e-5f));
  // several tensors in one call, an empty one among them: each sum is its own
  Vec h = randn(777, 3);
  Dev d_h(h);
  const float* host_tensors[3] = {g.data(), h.data(), h.data()};
  const float* dev_tensors[3] = {d_g.get(), d_h.get(), d_h.get()};
  const int64_t sizes[3] = {n, 777, 0};
  double ref[3], got[3] = {-1, -1, -1};
  k::ref::sum_squares(ref, host_tensors, sizes, 3);
  k::cuda::sum_squares(got, dev_tensors, sizes, 3);
  for (int i = 0; i < 3; i++) EXPECT_NEAR(got[i], ref[i], 1e-9 * ref[i]) << "tensor " << i;
  EXPECT_EQ(got[2], 0.0);
}

// The Llama block's ops: RMSNorm's three kernels, RoPE both ways, SwiGLU, the KV repetition.
TEST_P(CudaKernels, LlamaOps) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  (void)V, (void)Vp, (void)OC;
  Vec x = randn(N * C, 1, 2.0f), w = randn(C, 2), dy = randn(N * C, 3), d0 = randn(N * C, 4);
  Vec ss(N), rstd(N), out(N * C), dot(N), dx = d0, dw(C, 0.5f);
  k::ref::rmsnorm_sumsq(ss.data(), x.data(), N, C);
  rstd = ss;
  k::ref::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, C, 1e-5f);
  k::ref::rmsnorm_backward_dot(dot.data(), dy.data(), x.data(), w.data(), N, C);
  k::ref::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), dot.data(), N, C, C);
  Dev d_x(x), d_w(w), d_dy(dy), d_ss(N), d_out(N * C), d_dot(N), d_dx(d0), d_dw(Vec(C, 0.5f));
  k::cuda::rmsnorm_sumsq(d_ss.get(), d_x.get(), N, C);
  EXPECT_TRUE(allclose(d_ss.host(), ss, 1e-4f, 1e-5f));
  k::cuda::rmsnorm_forward(d_out.get(), d_ss.get(), d_x.get(), d_w.get(), N, C, C, 1e-5f);
  EXPECT_TRUE(allclose(d_ss.host(), rstd, 1e-6f, 1e-5f)) << "rstd";
  EXPECT_TRUE(allclose(d_out.host(), out, 1e-5f, 1e-5f));
  k::cuda::rmsnorm_backward_dot(d_dot.get(), d_dy.get(), d_x.get(), d_w.get(), N, C);
  EXPECT_TRUE(allclose(d_dot.host(), dot, 1e-4f, 1e-5f));
  k::cuda::rmsnorm_backward(d_dx.get(), d_dw.get(), d_dy.get(), d_x.get(), d_w.get(), d_ss.get(), d_dot.get(), N, C, C);
  EXPECT_TRUE(allclose(d_dx.host(), dx, 1e-5f, 1e-4f));
  EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));

  const int HS = C / NH - (C / NH) % 2, heads = NH - 1, stride = C;  // even head size; the last head untouched
  Vec cos(static_cast<size_t>(T) * HS / 2), sin(cos.size());
  for (size_t i = 0; i < cos.size(); i++) {
    cos[i] = std::cos(0.37f * static_cast<float>(i));
    sin[i] = std::sin(0.37f * static_cast<float>(i));
  }
  Dev d_cos(cos), d_sin(sin);
  Vec r = x;
  Dev d_r(x);
  k::ref::rope_forward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
  k::cuda::rope_forward(d_r.get(), d_cos.get(), d_sin.get(), B, T, heads, HS, stride);
  EXPECT_TRUE(allclose(d_r.host(), r, 1e-6f, 1e-6f)) << "rope_forward";
  k::ref::rope_backward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
  k::cuda::rope_backward(d_r.get(), d_cos.get(), d_sin.get(), B, T, heads, HS, stride);
  EXPECT_TRUE(allclose(d_r.host(), r, 1e-6f, 1e-6f)) << "rope_backward";

  const int F = C / 2;  // x as [N, 2F] = gate | up
  Vec act(N * F), dact = randn(N * F, 5), dgu = d0;
  k::ref::swiglu_forward(act.data(), x.data(), N, F);
  k::ref::swiglu_backward(dgu.data(), x.data(), dact.data(), N, F);
  Dev d_act(N * F), d_dact(dact), d_dgu(d0);
  k::cuda::swiglu_forward(d_act.get(), d_x.get(), N, F);
  k::cuda::swiglu_backward(d_dgu.get(), d_x.get(), d_dact.get(), N, F);
  EXPECT_TRUE(allclose(d_act.host(), act, 1e-6f, 1e-5f)) << "swiglu_forward";
  EXPECT_TRUE(allclose(d_dgu.host(), dgu, 1e-6f, 1e-5f)) << "swiglu_backward";

  const int NKV = 1, hs = C / (NH + 2 * NKV);  // q of NH heads, k and v of one, in the row's first columns
  const int in_w = (NH + 2 * NKV) * hs, out_w = 3 * NH * hs;
  Vec compact = randn(N * in_w, 6), rep(N * out_w), drep = randn(N * out_w, 7), dcompact = randn(N * in_w, 8);
  Vec dref = dcompact;
  k::ref::repeat_kv_forward(rep.data(), compact.data(), N, NH, NKV, hs);
  k::ref::repeat_kv_backward(dref.data(), drep.data(), N, NH, NKV, hs);
  Dev d_compact(compact), d_rep(N * out_w), d_drep(drep), d_dcompact(dcompact);
  k::cuda::repeat_kv_forward(d_rep.get(), d_compact.get(), N, NH, NKV, hs);
  k::cuda::repeat_kv_backward(d_dcompact.get(), d_drep.get(), N, NH, NKV, hs);
  EXPECT_TRUE(allclose(d_rep.host(), rep, 0, 0)) << "repeat_kv_forward";
  EXPECT_TRUE(allclose(d_dcompact.host(), dref, 1e-6f, 1e-6f)) << "repeat_kv_backward";
}

TEST(CudaKernelsErrors, BadShapesAreRefusedBeforeAnyLaunch) {
  AXONN_REQUIRE_GPU();
  // Heads that do not divide the channels are refused before anything is launched.
  Dev buf(64);
  EXPECT_THROW(k::cuda::attention_forward(buf.get(), buf.get(), buf.get(), 1, 2, 10, 3), axonn::InvalidArgument);
  try {
    k::cuda_synchronize();
  } catch (const axonn::CudaError& e) {
    ADD_FAILURE() << "the device is in an error state: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaKernels, ::testing::ValuesIn(kShapes), [](const auto& param) {
  const Shape& s = param.param;
  return "B" + std::to_string(s.B) + "T" + std::to_string(s.T) + "C" + std::to_string(s.C) + "V" +
         std::to_string(s.V);
});
