// Every bf16 CUDA kernel (kernels::cuda_bf16_ops()) against the CPU oracle kernels::ref_bf16_ops() on awkward
// shapes; the flash attention's lse at fp32 level; a sharded LayerNorm and cross-entropy in their steps over two
// ranks, on device arrays (two "ranks" as two threads on one GPU). Without a CUDA device every test is SKIPPED.
//
// Tolerances. Both sides compute in fp32 and round each bf16 output once, but sum in different orders
// (cuBLASLt's tiles, warp butterflies, the online softmax), so an fp32 value a few fp32 ulps off can round
// to the neighbouring bf16: bf16 outputs agree within ONE bf16 ulp (2^-7 relative) plus 1e-4 absolute
// (values near 0 that come out of cancellation). fp32 outputs (parameter gradients, statistics, losses,
// lse) agree at fp32 level: 1e-5 relative (1e-4 for gradients summed over hundreds of rows) plus a small
// absolute term. Pure copies and single additions (embedding, position, residual, casts) are bit-exact.
// The flash attention's bound adds one bf16 ulp of the sum of the terms' magnitudes where the kernels round
// what the oracle does not (D from the bf16 output; the tensor cores' bf16 probabilities): AttentionMagnitudes.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/cuda.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "attention_bound.hpp"
#include "gpu_test.hpp"
#include "kv_cache_cases.hpp"
#include "row_steps.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::bf16_to_f32;
using axonn::f32_to_bf16;
using axonn::test::allclose;
using axonn::test::attention_magnitudes;
using axonn::test::AttentionMagnitudes;
using axonn::test::close_attention;
using axonn::test::crossentropy_rows;
using axonn::test::crossentropy_gradient_steps;
using axonn::test::crossentropy_steps;
using axonn::test::layernorm_backward_steps;
using axonn::test::layernorm_steps;
using axonn::test::DeviceArray;
using axonn::test::randint;
using axonn::test::rand_bf;
using axonn::test::randn;
using axonn::test::to_bf;
using axonn::test::widen;
using k::bf16;
using Vec = std::vector<float>;
using Bf = std::vector<bf16>;
using FDev = DeviceArray<float>;
using BDev = DeviceArray<bf16>;
using IDev = DeviceArray<int>;

namespace {

constexpr float kUlp = axonn::test::kBf16Ulp;
constexpr float kAbs = axonn::test::kBf16Abs;


// bf16 results within one bf16 ulp (+ kAbs) of the oracle's.
::testing::AssertionResult close_bf16(const Bf& got, const Bf& want) {
  return allclose(widen(got), widen(want), kAbs, kUlp);
}

const k::OpsBf16& gpu() { return k::cuda_bf16_ops(); }
const k::OpsBf16& cpu() { return k::ref_bf16_ops(); }

struct Shape {
  int B, T, C, NH, V, Vp, OC;
  int64_t N() const { return static_cast<int64_t>(B) * T; }
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " V=" << s.V << " Vp=" << s.Vp
      << " OC=" << s.OC;
}
// The second crosses every block size: rows longer than a warp, more rows than a column chunk (256), a
// vocabulary longer than a block (512), T = 67 not a multiple of the attention tiles (64 rows, 32 keys).
// Head sizes 8 and 64 (the CUDA-core flash kernels take multiples of 8; 64 also runs on tensor cores).
const Shape kShapes[] = {{3, 7, 24, 3, 37, 40, 10}, {5, 67, 320, 5, 1003, 1024, 77}};

class CudaBf16 : public ::testing::TestWithParam<Shape> {};

}  // namespace

TEST(CudaBf16Ops, TableIsComplete) {
  // No device needed: every entry of the table is linked.
  const auto& t = gpu();
  const void* entries[] = {reinterpret_cast<const void*>(t.embedding_forward),
                           reinterpret_cast<const void*>(t.layernorm_sum),
                           reinterpret_cast<const void*>(t.layernorm_backward_sums),
                           reinterpret_cast<const void*>(t.layernorm_backward),
                           reinterpret_cast<const void*>(t.matmul_backward),
                           reinterpret_cast<const void*>(t.attention_backward),
                           reinterpret_cast<const void*>(t.crossentropy_max),
                           reinterpret_cast<const void*>(t.crossentropy_sums),
                           reinterpret_cast<const void*>(t.softmax_crossentropy_forward),
                           reinterpret_cast<const void*>(t.softmax_crossentropy_backward),
                           reinterpret_cast<const void*>(t.softmax_crossentropy_forward_backward),
                           reinterpret_cast<const void*>(t.adamw_update),
                           reinterpret_cast<const void*>(t.cast_to_f32),
                           reinterpret_cast<const void*>(t.kv_cache_append),
                           reinterpret_cast<const void*>(t.attention_cached_forward)};
  for (const void* e : entries) EXPECT_NE(e, nullptr);
  EXPECT_NE(reinterpret_cast<const void*>(t.matmul_forward), reinterpret_cast<const void*>(cpu().matmul_forward));
  // The tables with the attention forced to one implementation differ from it there and only there.
  EXPECT_EQ(&k::cuda_bf16_ops(k::FlashAttention::kDefault), &t);
  for (auto impl :
       {k::FlashAttention::kTensorCores, k::FlashAttention::kCudaCores, k::FlashAttention::kTensorCoresMma}) {
    const auto& forced = k::cuda_bf16_ops(impl);
    EXPECT_NE(forced.attention_forward, t.attention_forward);
    EXPECT_NE(forced.attention_backward, t.attention_backward);
    EXPECT_EQ(forced.matmul_forward, t.matmul_forward);
    EXPECT_EQ(forced.cast_to_f32, t.cast_to_f32);
  }
  EXPECT_NE(k::cuda_bf16_ops(k::FlashAttention::kTensorCores).attention_forward,
            k::cuda_bf16_ops(k::FlashAttention::kCudaCores).attention_forward);
  EXPECT_NE(k::cuda_bf16_ops(k::FlashAttention::kTensorCores).attention_backward,
            k::cuda_bf16_ops(k::FlashAttention::kTensorCoresMma).attention_backward);
}

TEST_P(CudaBf16, EmbeddingAndPosition) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  Bf wte = rand_bf(Vp * C, 1), wpe = rand_bf(T * C, 2), dy = rand_bf(N * C, 3);
  auto inp = randint(N, V, 4);
  inp[1] = inp[2] = inp[0];  // repeated tokens: the scatter must accumulate
  IDev d_inp(inp);
  BDev d_dy(dy);
  for (auto [begin, rows] : {std::pair{0, Vp}, std::pair{9, 11}}) {
    Bf w(wte.begin() + begin * C, wte.begin() + (begin + rows) * C), want(N * C);
    cpu().embedding_forward(want.data(), inp.data(), w.data(), begin, rows, N, C);
    BDev d_w(w), d_out(Bf(N * C, 0x4000));
    gpu().embedding_forward(d_out.get(), d_inp.get(), d_w.get(), begin, rows, N, C);
    EXPECT_EQ(d_out.host(), want) << "rows [" << begin << ", " << begin + rows << ")";
    Vec dw(rows * C, 0.5f);
    FDev d_dw(dw);
    cpu().embedding_backward(dw.data(), dy.data(), inp.data(), begin, rows, N, C);
    gpu().embedding_backward(d_dw.get(), d_dy.get(), d_inp.get(), begin, rows, N, C);
    EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-5f, 1e-5f));
  }
  Bf p = rand_bf(N * C, 5);
  BDev d_p(p), d_wpe(wpe);
  cpu().position_forward(p.data(), wpe.data(), B, T, C);
  gpu().position_forward(d_p.get(), d_wpe.get(), B, T, C);
  EXPECT_EQ(d_p.host(), p) << "one fp32 addition, rounded once: bit-exact";
  Vec dp(T * C, 0.25f);
  FDev d_dp(dp);
  cpu().position_backward(dp.data(), dy.data(), B, T, C);
  gpu().position_backward(d_dp.get(), d_dy.get(), B, T, C);
  EXPECT_TRUE(allclose(d_dp.host(), dp, 1e-5f, 1e-5f));
}

TEST_P(CudaBf16, LayerNorm) {
  AXONN_REQUIRE_GPU();
  const int C = GetParam().C;
  const int64_t N = GetParam().N();
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), b = rand_bf(C, 3), dy = rand_bf(N * C, 4),
     d0 = rand_bf(N * C, 5);
  Bf out(N * C);
  Vec mean(N), rstd(N);
  layernorm_steps(cpu(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C);
  BDev d_x(x), d_w(w), d_b(b), d_out(N * C), d_dy(dy), d_dinp(d0);
  FDev d_mean(N), d_rstd(N);
  layernorm_steps(gpu(), d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_w.get(), d_b.get(), N, C, C);
  EXPECT_TRUE(close_bf16(d_out.host(), out));
  EXPECT_TRUE(allclose(d_mean.host(), mean, 1e-5f, 1e-5f));
  EXPECT_TRUE(allclose(d_rstd.host(), rstd, 1e-5f, 1e-5f));

  Bf dinp = d0;
  Vec dw(C, 0.5f), db(C, -0.5f);
  FDev d_dw(dw), d_db(db), d_sums(2 * N);
  Vec sums(2 * N);
  layernorm_backward_steps(cpu(), sums.data(), dinp.data(), dw.data(), db.data(), dy.data(), x.data(),
                           w.data(), mean.data(), rstd.data(), N, C, C);
  layernorm_backward_steps(gpu(), d_sums.get(), d_dinp.get(), d_dw.get(), d_db.get(), d_dy.get(), d_x.get(),
                           d_w.get(), d_mean.get(), d_rstd.get(), N, C, C);
  EXPECT_TRUE(close_bf16(d_dinp.host(), dinp));
  EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));
  EXPECT_TRUE(allclose(d_db.host(), db, 1e-3f, 1e-4f));
}

// The Llama block's ops in bf16 against ref_bf16: within one bf16 rounding (the GPU sums the row
// statistics in another order); fp32 statistics and weight gradient.
TEST_P(CudaBf16, LlamaOps) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  (void)V, (void)Vp, (void)OC;
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), dy = rand_bf(N * C, 3), d0 = rand_bf(N * C, 4);
  Bf out(N * C), dinp = d0;
  Vec ss(N), dot(N), dw(C, 0.5f);
  cpu().rmsnorm_sumsq(ss.data(), x.data(), N, C);
  Vec rstd = ss;
  cpu().rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, C, 1e-5f);
  cpu().rmsnorm_backward_dot(dot.data(), dy.data(), x.data(), w.data(), N, C);
  cpu().rmsnorm_backward(dinp.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), dot.data(), N, C, C);
  BDev d_x(x), d_w(w), d_dy(dy), d_out(N * C), d_dinp(d0);
  FDev d_ss(N), d_dot(N), d_dw(Vec(C, 0.5f));
  gpu().rmsnorm_sumsq(d_ss.get(), d_x.get(), N, C);
  EXPECT_TRUE(allclose(d_ss.host(), ss, 1e-4f, 1e-5f));
  gpu().rmsnorm_forward(d_out.get(), d_ss.get(), d_x.get(), d_w.get(), N, C, C, 1e-5f);
  EXPECT_TRUE(allclose(d_ss.host(), rstd, 1e-6f, 1e-5f));
  EXPECT_TRUE(close_bf16(d_out.host(), out));
  gpu().rmsnorm_backward_dot(d_dot.get(), d_dy.get(), d_x.get(), d_w.get(), N, C);
  EXPECT_TRUE(allclose(d_dot.host(), dot, 1e-4f, 1e-4f));
  gpu().rmsnorm_backward(d_dinp.get(), d_dw.get(), d_dy.get(), d_x.get(), d_w.get(), d_ss.get(), d_dot.get(), N, C, C);
  EXPECT_TRUE(close_bf16(d_dinp.host(), dinp));
  EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f));

  const int HS = C / NH - (C / NH) % 2, heads = NH, stride = C;
  Vec cos(static_cast<size_t>(T) * HS / 2), sin(cos.size());
  for (size_t i = 0; i < cos.size(); i++) {
    cos[i] = std::cos(0.37f * static_cast<float>(i));
    sin[i] = std::sin(0.37f * static_cast<float>(i));
  }
  FDev d_cos(cos), d_sin(sin);
  Bf r = x;
  BDev d_r(x);
  cpu().rope_forward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
  gpu().rope_forward(d_r.get(), d_cos.get(), d_sin.get(), B, T, heads, HS, stride);
  EXPECT_TRUE(close_bf16(d_r.host(), r)) << "rope_forward";
  cpu().rope_backward(r.data(), cos.data(), sin.data(), B, T, heads, HS, stride);
  gpu().rope_backward(d_r.get(), d_cos.get(), d_sin.get(), B, T, heads, HS, stride);
  EXPECT_TRUE(close_bf16(d_r.host(), r)) << "rope_backward";

  const int F = C / 2;
  Bf act(N * F), dact = rand_bf(N * F, 5), dgu = d0;
  cpu().swiglu_forward(act.data(), x.data(), N, F);
  cpu().swiglu_backward(dgu.data(), x.data(), dact.data(), N, F);
  BDev d_act(N * F), d_dact(dact), d_dgu(d0);
  gpu().swiglu_forward(d_act.get(), d_x.get(), N, F);
  gpu().swiglu_backward(d_dgu.get(), d_x.get(), d_dact.get(), N, F);
  EXPECT_TRUE(close_bf16(d_act.host(), act)) << "swiglu_forward";
  EXPECT_TRUE(close_bf16(d_dgu.host(), dgu)) << "swiglu_backward";

  const int NKV = 1, hs = C / (NH + 2 * NKV), in_w = (NH + 2 * NKV) * hs, out_w = 3 * NH * hs;
  Bf compact = rand_bf(N * in_w, 6), rep(N * out_w), drep = rand_bf(N * out_w, 7), dcompact = rand_bf(N * in_w, 8);
  Bf dref = dcompact;
  cpu().repeat_kv_forward(rep.data(), compact.data(), N, NH, NKV, hs);
  cpu().repeat_kv_backward(dref.data(), drep.data(), N, NH, NKV, hs);
  BDev d_compact(compact), d_rep(N * out_w), d_drep(drep), d_dcompact(dcompact);
  gpu().repeat_kv_forward(d_rep.get(), d_compact.get(), N, NH, NKV, hs);
  gpu().repeat_kv_backward(d_dcompact.get(), d_drep.get(), N, NH, NKV, hs);
  EXPECT_EQ(d_rep.host(), rep) << "repeat_kv_forward copies";
  EXPECT_TRUE(close_bf16(d_dcompact.host(), dref)) << "repeat_kv_backward";
}

TEST_P(CudaBf16, MatmulThroughCublasLt) {
  AXONN_REQUIRE_GPU();
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  const int64_t N = GetParam().N();
  Bf x = rand_bf(N * C, 1), w = rand_bf(OC * C, 2), bias = rand_bf(OC, 3), dy = rand_bf(N * OC, 4),
     d0 = rand_bf(N * C, 5);
  // offset 0: cudaMalloc'd (256-byte aligned) pointers; offset 1: every pointer 2 bytes off, which rules out
  // the aligned cuBLASLt kernels and takes the staged-bias path.
  for (int off : {0, 1}) {
    SCOPED_TRACE("pointer offset " + std::to_string(off) + " elements");
    auto pad = [off](const Bf& v) {
      Bf p(v.size() + static_cast<size_t>(off), 0);
      std::copy(v.begin(), v.end(), p.begin() + off);
      return p;
    };
    auto unpad = [off](const Bf& v) { return Bf(v.begin() + off, v.end()); };
    BDev d_x(pad(x)), d_w(pad(w)), d_bias(pad(bias)), d_dy(pad(dy)), d_out(pad(Bf(N * OC))), d_dinp(pad(d0));
    for (bool with_bias : {true, false}) {
      Bf want(N * OC);
      cpu().matmul_forward(want.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N, C, OC);
      gpu().matmul_forward(d_out.get() + off, d_x.get() + off, d_w.get() + off,
                           with_bias ? d_bias.get() + off : nullptr, N, C, OC);
      EXPECT_TRUE(close_bf16(unpad(d_out.host()), want)) << "forward, bias " << with_bias;
    }
    Bf dinp = d0;
    Vec dw(OC * C, 0.5f), db(OC, 0.25f);
    FDev d_dw(dw), d_db(db);
    cpu().matmul_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
    // In two calls, as the tensor-parallel linear makes them: dinp first, then dweight and dbias.
    gpu().matmul_backward(d_dinp.get() + off, nullptr, nullptr, d_dy.get() + off, d_x.get() + off, d_w.get() + off, N,
                          C, OC);
    gpu().matmul_backward(nullptr, d_dw.get(), d_db.get(), d_dy.get() + off, d_x.get() + off, d_w.get() + off, N, C,
                          OC);
    EXPECT_TRUE(close_bf16(unpad(d_dinp.host()), dinp)) << "dinp += dout W (bf16, beta 1)";
    EXPECT_TRUE(allclose(d_dw.host(), dw, 1e-3f, 1e-4f)) << "dweight += (fp32 output, beta 1)";
    EXPECT_TRUE(allclose(d_db.host(), db, 1e-3f, 1e-4f));
  }
}

namespace {

// ---- flash attention: both implementations (kernels::FlashAttention) against the oracle and each other ----
//
bool has_tensor_core_kernel(int HS) { return HS == 64 || HS == 128; }

struct AttentionRun {
  Bf out, dqkv;
};

// One attention problem: random inputs (q, k, v of scale 1.5, an old dqkv the backward adds to), the
// oracle's results, and the magnitudes of the attention bounds.
struct AttentionCase {
  int B, T, C, NH;
  Bf qkv, dy, d0, out, dqkv;
  Vec lse, D;
  AttentionMagnitudes mag;

  AttentionCase(int B_, int T_, int NH_, int HS, uint32_t seed)
      : B(B_), T(T_), C(NH_ * HS), NH(NH_), qkv(rand_bf(nqkv(), seed, 1.5f)), dy(rand_bf(nout(), seed + 1)),
        d0(rand_bf(nqkv(), seed + 2)), out(nout()), dqkv(d0), lse(nlse()), D(nlse()) {
    cpu().attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    cpu().attention_backward(dqkv.data(), D.data(), dy.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
    mag = attention_magnitudes(qkv, dy, out, lse, D, B, T, C, NH);
  }
  size_t nqkv() const { return static_cast<size_t>(B) * T * 3 * C; }
  size_t nout() const { return static_cast<size_t>(B) * T * C; }
  size_t nlse() const { return static_cast<size_t>(B) * NH * T; }

  // `impl`'s forward (out, lse) and backward from the oracle's out and lse (so both see the same D) against
  // the oracle, each run twice from the same inputs for the same bits; returns the device results.
  AttentionRun run(k::FlashAttention impl) const {
    const auto& ops = k::cuda_bf16_ops(impl);
    const k::FlashAttention ran = impl == k::FlashAttention::kDefault ? k::cuda_flash_attention_for(C / NH) : impl;
    const bool tc = ran == k::FlashAttention::kTensorCores || ran == k::FlashAttention::kTensorCoresMma;
    BDev d_qkv(qkv), d_dy(dy), d_out(nout()), d_out2(nout()), d_dqkv(d0), d_dqkv2(d0), d_out_ref(out);
    FDev d_lse(nlse()), d_scratch(Vec(nlse(), 123.0f)), d_lse_ref(lse);
    ops.attention_forward(d_out.get(), d_lse.get(), d_qkv.get(), B, T, C, NH);
    ops.attention_forward(d_out2.get(), d_lse.get(), d_qkv.get(), B, T, C, NH);
    AttentionRun r{d_out.host(), {}};
    EXPECT_TRUE(tc ? close_attention(r.out, out, {&mag.out}) : close_attention(r.out, out, {})) << "out";
    EXPECT_EQ(d_out2.host(), r.out) << "forward deterministic";
    EXPECT_TRUE(allclose(d_lse.host(), lse, 1e-5f, 1e-5f)) << "lse at fp32 level";
    ops.attention_backward(d_dqkv.get(), d_scratch.get(), d_dy.get(), d_qkv.get(), d_out_ref.get(), d_lse_ref.get(),
                           B, T, C, NH);
    EXPECT_TRUE(allclose(d_scratch.host(), D, 1e-5f, 1e-5f)) << "scratch = rowsum(dout * out)";
    r.dqkv = d_dqkv.host();
    EXPECT_TRUE(tc ? close_attention(r.dqkv, dqkv, {&mag.dqkv_of_d, &mag.dqkv})
                   : close_attention(r.dqkv, dqkv, {&mag.dqkv_of_d}))
        << "dqkv (accumulated into the old values)";
    ops.attention_backward(d_dqkv2.get(), d_scratch.get(), d_dy.get(), d_qkv.get(), d_out_ref.get(),
                           d_lse_ref.get(), B, T, C, NH);
    EXPECT_EQ(d_dqkv2.host(), r.dqkv) << "backward deterministic (no atomics)";
    return r;
  }
};

// The CUDA cores and the WMMA tensor cores where they take head size HS against the oracle, the tensor cores
// against the CUDA cores (same bound: both are within it of the exact result's rounding); the default gives the
// bits of the one cuda_flash_attention_for() names. The register-resident kernels (kTensorCoresMma) run here only
// when they are the default: their own tests (CudaBf16AttentionMma, check_mma_attention) run them on these
// shapes, in a process of their own in the GPU check (its kernels_bf16_mma row), so that a fault in kernels that
// have never run on a GPU cannot take this binary's other tests down with it (a CUDA fault ends the context).
void check_flash_attention(int B, int T, int NH, int HS, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
               " HS=" + std::to_string(HS));
  const AttentionCase c(B, T, NH, HS, seed);
  const k::FlashAttention chosen = k::cuda_flash_attention_for(HS);
  AttentionRun simt, tc, mma;
  {
    SCOPED_TRACE("CUDA cores");
    simt = c.run(k::FlashAttention::kCudaCores);
  }
  if (has_tensor_core_kernel(HS)) {
    {
      SCOPED_TRACE("tensor cores (WMMA)");
      tc = c.run(k::FlashAttention::kTensorCores);
    }
    EXPECT_TRUE(close_attention(tc.out, simt.out, {&c.mag.out})) << "out: tensor cores vs CUDA cores";
    EXPECT_TRUE(close_attention(tc.dqkv, simt.dqkv, {&c.mag.dqkv})) << "dqkv: tensor cores vs CUDA cores";
  }
  if (chosen == k::FlashAttention::kTensorCoresMma) {
    SCOPED_TRACE("tensor cores (mma, register-resident), the default");
    mma = c.run(k::FlashAttention::kTensorCoresMma);
  }
  SCOPED_TRACE("default");
  const AttentionRun def = c.run(k::FlashAttention::kDefault);
  const AttentionRun& want = chosen == k::FlashAttention::kTensorCores      ? tc
                             : chosen == k::FlashAttention::kTensorCoresMma ? mma
                                                                            : simt;
  EXPECT_EQ(def.out, want.out);
  EXPECT_EQ(def.dqkv, want.dqkv);
}

// The register-resident tensor-core kernels (kTensorCoresMma) against the oracle (in run: forward and backward,
// each twice for the same bits) and against the CUDA cores, as check_flash_attention does the WMMA kernels.
void check_mma_attention(int B, int T, int NH, int HS, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
               " HS=" + std::to_string(HS));
  ASSERT_TRUE(has_tensor_core_kernel(HS));
  const AttentionCase c(B, T, NH, HS, seed);
  AttentionRun simt, mma;
  {
    SCOPED_TRACE("CUDA cores");
    simt = c.run(k::FlashAttention::kCudaCores);
  }
  {
    SCOPED_TRACE("tensor cores (mma, register-resident)");
    mma = c.run(k::FlashAttention::kTensorCoresMma);
  }
  EXPECT_TRUE(close_attention(mma.out, simt.out, {&c.mag.out})) << "out: mma tensor cores vs CUDA cores";
  EXPECT_TRUE(close_attention(mma.dqkv, simt.dqkv, {&c.mag.dqkv})) << "dqkv: mma tensor cores vs CUDA cores";
}

}  // namespace

TEST_P(CudaBf16, FlashAttention) {
  AXONN_REQUIRE_GPU();
  // Shape 1: HS = 8 (CUDA cores only); shape 2: HS = 64, T = 67 (a partial tile), B * NH = 25 heads.
  const auto [B, T, C, NH, V, Vp, OC] = GetParam();
  check_flash_attention(B, T, NH, C / NH, 1);
}

// Generation's KV cache in bf16 (kv_cache.cu): the appends are copies (exact, nothing else written); the
// attention over the cache within one bf16 ulp of ref_bf16's (both widen, sum in fp32 and round once). The
// fp32 test's shapes (kv_cache_cases.hpp).
TEST(CudaBf16KvCache, AppendAndAttendOverTheCacheMatchRefBf16) {
  AXONN_REQUIRE_GPU();
  for (const axonn::test::KvCacheCase& c : axonn::test::kv_cache_cases()) {
    const int Q = c.NH * c.HS, K = c.NKV * c.HS, W = Q + 2 * K;
    const size_t cache = static_cast<size_t>(c.B) * c.Tc * K;
    Bf kc(cache, f32_to_bf16(7.0f)), vc(cache, f32_to_bf16(7.0f));
    BDev d_kc(kc), d_vc(vc);
    int pos = 0;
    for (int n : c.chunks) {
      const Bf qkv = rand_bf(static_cast<size_t>(c.B) * n * W, static_cast<uint32_t>(10 + pos));
      Bf out(static_cast<size_t>(c.B) * n * Q);
      cpu().kv_cache_append(kc.data(), vc.data(), qkv.data(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS);
      cpu().attention_cached_forward(out.data(), qkv.data(), kc.data(), vc.data(), c.B, n, pos, c.Tc, c.NH, c.NKV,
                                     c.HS);
      BDev d_qkv(qkv), d_out(Bf(out.size(), f32_to_bf16(9.0f)));
      gpu().kv_cache_append(d_kc.get(), d_vc.get(), d_qkv.get(), c.B, n, pos, c.Tc, c.NH, c.NKV, c.HS);
      gpu().attention_cached_forward(d_out.get(), d_qkv.get(), d_kc.get(), d_vc.get(), c.B, n, pos, c.Tc, c.NH,
                                     c.NKV, c.HS);
      const std::string what = c.describe(n, pos);
      EXPECT_EQ(d_kc.host(), kc) << what;  // copies: exact, and nothing else written
      EXPECT_EQ(d_vc.host(), vc) << what;
      EXPECT_TRUE(close_bf16(d_out.host(), out)) << what;
      pos += n;
    }
  }
}

TEST(CudaBf16Attention, EveryKindOfHeadSize) {
  AXONN_REQUIRE_GPU();
  // HS = 8 (one pack), 40 (not a power of two), 128 (the largest, tensor cores too); T = 100 crosses the tiles.
  for (int HS : {8, 40, 128}) check_flash_attention(2, 100, 2, HS, 11);
}

namespace {
// Around the tensor cores' 64-row tiles: one row, exactly one tile, four whole tiles, two and a bit at HS = 128.
struct FlashCase {
  int B, T, NH, HS;
  uint32_t seed;
};
constexpr FlashCase kTensorCoreTiles[] = {
    {1, 1, 1, 64, 21}, {1, 64, 2, 64, 22}, {1, 256, 1, 64, 23}, {2, 130, 3, 128, 24}};
}  // namespace

TEST(CudaBf16Attention, TensorCoreTiles) {
  AXONN_REQUIRE_GPU();
  for (const FlashCase& c : kTensorCoreTiles) check_flash_attention(c.B, c.T, c.NH, c.HS, c.seed);
}

// The register-resident kernels on the shapes the tests above give the WMMA kernels: the second CudaBf16 shape
// (HS = 64, T = 67: a partial tile, 25 heads), EveryKindOfHeadSize's HS = 128 and TensorCoreTiles' four.
TEST(CudaBf16AttentionMma, AgainstTheOracleAndTheCudaCores) {
  AXONN_REQUIRE_GPU();
  const Shape& s = kShapes[1];
  check_mma_attention(s.B, s.T, s.NH, s.C / s.NH, 1);
  check_mma_attention(2, 100, 2, 128, 11);
}

TEST(CudaBf16AttentionMma, TensorCoreTiles) {
  AXONN_REQUIRE_GPU();
  for (const FlashCase& c : kTensorCoreTiles) check_mma_attention(c.B, c.T, c.NH, c.HS, c.seed);
}

TEST(CudaBf16Attention, DefaultIsTensorCoresWhereTheyApply) {
  AXONN_REQUIRE_GPU();
  const char* env = std::getenv("AXONN_FLASH_ATTENTION");
  if (env != nullptr && *env != '\0' && std::string(env) != "auto")
    GTEST_SKIP() << "AXONN_FLASH_ATTENTION=" << env << " is set";
  // sm_80 / sm_90 (A100, H100, H200) give a block the shared memory of the HS = 128 kernels.
  EXPECT_EQ(k::cuda_flash_attention_for(64), k::FlashAttention::kTensorCores);
  EXPECT_EQ(k::cuda_flash_attention_for(128), k::FlashAttention::kTensorCores);
  EXPECT_EQ(k::cuda_flash_attention_for(40), k::FlashAttention::kCudaCores);
  // Forced where they do not apply: refused before anything runs.
  BDev buf(3 * 2 * 4 * 40);
  FDev lse(2 * 4);
  BDev big(3 * 4 * 64 + 1);
  for (auto impl : {k::FlashAttention::kTensorCores, k::FlashAttention::kTensorCoresMma}) {
    EXPECT_THROW(k::cuda_bf16_ops(impl).attention_forward(buf.get(), lse.get(), buf.get(), 1, 4, 80, 2),
                 axonn::InvalidArgument)
        << "head size 40";
    EXPECT_THROW(k::cuda_bf16_ops(impl).attention_forward(big.get() + 1, lse.get(), big.get() + 1, 1, 4, 64, 1),
                 axonn::InvalidArgument)
        << "buffers 2 bytes off 16-byte alignment";
  }
  EXPECT_NO_THROW(k::cuda_synchronize());
}

TEST(CudaBf16Attention, EnvironmentVariable) {
  // No device needed: "simt" is answered before the device is asked, and a bad value is refused; "mma" with a
  // device.
  const char* old = std::getenv("AXONN_FLASH_ATTENTION");
  const std::string saved = old != nullptr ? old : "";
  setenv("AXONN_FLASH_ATTENTION", "simt", 1);
  EXPECT_EQ(k::cuda_flash_attention_for(64), k::FlashAttention::kCudaCores);
  setenv("AXONN_FLASH_ATTENTION", "mma", 1);
  if (axonn::test::no_gpu_reason().empty()) {  // named: its conditions are checked, the device's shared memory too
    EXPECT_EQ(k::cuda_flash_attention_for(64), k::FlashAttention::kTensorCoresMma);
  }
  setenv("AXONN_FLASH_ATTENTION", "tensor", 1);
  EXPECT_THROW(k::cuda_flash_attention_for(64), axonn::InvalidArgument);
  if (old != nullptr)
    setenv("AXONN_FLASH_ATTENTION", saved.c_str(), 1);
  else
    unsetenv("AXONN_FLASH_ATTENTION");
}

TEST(CudaBf16Attention, UnsupportedHeadSizeIsRefused) {
  AXONN_REQUIRE_GPU();
  BDev buf(4096);
  FDev lse(64);
  EXPECT_THROW(gpu().attention_forward(buf.get(), lse.get(), buf.get(), 1, 4, 12, 1), axonn::InvalidArgument);   // 12
  EXPECT_THROW(gpu().attention_forward(buf.get(), lse.get(), buf.get(), 1, 4, 272, 1), axonn::InvalidArgument);  // 272
  EXPECT_THROW(gpu().attention_forward(buf.get(), lse.get(), buf.get(), 1, 4, 10, 3), axonn::InvalidArgument);
  EXPECT_NO_THROW(k::cuda_synchronize());
}

TEST_P(CudaBf16, GeluResidualAndCasts) {
  AXONN_REQUIRE_GPU();
  const int64_t N = GetParam().N() * GetParam().C + 5;  // not a multiple of the 8-element packs
  Bf a = rand_bf(N, 1, 2.0f), b = rand_bf(N, 2), dy = rand_bf(N, 3), d0 = rand_bf(N, 4), d1 = rand_bf(N, 5);
  BDev d_a(a), d_b(b), d_dy(dy), d_out(N);
  Bf want(N);
  cpu().gelu_forward(want.data(), a.data(), N);
  gpu().gelu_forward(d_out.get(), d_a.get(), N);
  EXPECT_TRUE(close_bf16(d_out.host(), want)) << "gelu forward (device tanhf vs host tanh)";
  Bf dinp = d0;
  BDev d_dinp(d0);
  cpu().gelu_backward(dinp.data(), a.data(), dy.data(), N);
  gpu().gelu_backward(d_dinp.get(), d_a.get(), d_dy.get(), N);
  EXPECT_TRUE(close_bf16(d_dinp.host(), dinp));
  cpu().residual_forward(want.data(), a.data(), b.data(), N);
  gpu().residual_forward(d_out.get(), d_a.get(), d_b.get(), N);
  EXPECT_EQ(d_out.host(), want) << "one addition, rounded once: bit-exact";
  Bf da = d0, db = d1;
  BDev d_da(d0), d_db(d1);
  cpu().residual_backward(da.data(), db.data(), dy.data(), N);
  gpu().residual_backward(d_da.get(), d_db.get(), d_dy.get(), N);
  EXPECT_EQ(d_da.host(), da);
  EXPECT_EQ(d_db.host(), db);
  // Unaligned pointers (2 bytes off) take the scalar path and give the same bits.
  BDev d_out1(Bf(N + 1));
  gpu().residual_forward(d_out1.get() + 1, d_a.get(), d_b.get(), N);
  const Bf out1 = d_out1.host();  // one copy: begin() and end() of two host() copies are no range
  EXPECT_EQ(Bf(out1.begin() + 1, out1.end()), want);

  Vec f = randn(N, 6, 3.0f);
  FDev d_f(f), d_back(N);
  Bf cast(N);
  cpu().cast_from_f32(cast.data(), f.data(), N);
  gpu().cast_from_f32(d_out.get(), d_f.get(), N);
  EXPECT_EQ(d_out.host(), cast) << "round-to-nearest-even, as core/dtype.hpp";
  gpu().cast_to_f32(d_back.get(), d_out.get(), N);
  EXPECT_EQ(d_back.host(), widen(cast));
}

TEST_P(CudaBf16, SoftmaxCrossEntropy) {
  AXONN_REQUIRE_GPU();
  const int V = GetParam().V, Vp = GetParam().Vp;
  const int64_t N = GetParam().N();
  Bf z = rand_bf(N * Vp, 1, 3.0f);
  auto targets = randint(N, V, 2);
  IDev d_t(targets);
  Vec losses(N);
  Bf probs(N * Vp);
  crossentropy_rows(cpu(), losses.data(), probs.data(), z.data(), targets.data(), N, V, Vp);
  BDev d_z(z);
  FDev d_losses(N), d_row_values(3 * N);
  // In place (probs aliasing logits), as the model calls it.
  crossentropy_steps(gpu(), d_row_values.get(), d_losses.get(), d_z.get(), d_z.get(), d_t.get(), N, V, Vp, 0);
  EXPECT_TRUE(allclose(d_losses.host(), losses, 1e-5f, 1e-5f));
  EXPECT_TRUE(close_bf16(d_z.host(), probs));
  const float dloss = 1.0f / static_cast<float>(N);
  Vec mask(N, 1.0f);  // per-token weights (the Goldfish mask): every third token dropped
  for (int64_t n = 0; n < N; n += 3) mask[n] = 0.0f;
  FDev d_mask(mask);
  for (bool weighted : {false, true}) {
    const float* w = weighted ? mask.data() : nullptr;
    const float* d_w = weighted ? d_mask.get() : nullptr;
    Bf d0 = rand_bf(N * Vp, 3), dz = d0;
    BDev d_dz(d0), d_probs(probs);
    cpu().softmax_crossentropy_backward(dz.data(), probs.data(), targets.data(), w, dloss, N, V, Vp, 0);
    gpu().softmax_crossentropy_backward(d_dz.get(), d_probs.get(), d_t.get(), d_w, dloss, N, V, Vp, 0);
    EXPECT_TRUE(close_bf16(d_dz.host(), dz)) << "accumulating" << (weighted ? ", weighted" : "");
    Bf inplace = probs;
    cpu().softmax_crossentropy_backward(inplace.data(), inplace.data(), targets.data(), w, dloss, N, V, Vp, 0);
    gpu().softmax_crossentropy_backward(d_probs.get(), d_probs.get(), d_t.get(), d_w, dloss, N, V, Vp, 0);
    EXPECT_TRUE(close_bf16(d_probs.host(), inplace)) << "in place" << (weighted ? ", weighted" : "");
    // a training forward's losses and gradient in one pass over the logits, in place: the bits of the GPU's two
    // steps (its in-place forward above left its bf16 probabilities in d_z), the CPU's within the bound
    BDev d_one(z), d_two(d_z.host());
    FDev d_one_loss(N), d_one_rows(3 * N);
    crossentropy_gradient_steps(gpu(), d_one_rows.get(), d_one_loss.get(), d_one.get(), d_one.get(), d_t.get(), d_w,
                                dloss, N, V, Vp, 0);
    gpu().softmax_crossentropy_backward(d_two.get(), d_two.get(), d_t.get(), d_w, dloss, N, V, Vp, 0);
    EXPECT_EQ(d_one.host(), d_two.host()) << "one pass" << (weighted ? ", weighted" : "");
    EXPECT_EQ(d_one_loss.host(), d_losses.host()) << "one pass";
    EXPECT_TRUE(close_bf16(d_one.host(), inplace)) << "one pass" << (weighted ? ", weighted" : "");
  }
}

TEST_P(CudaBf16, AdamW) {
  AXONN_REQUIRE_GPU();
  const int64_t n = GetParam().N() * GetParam().C + 3;
  Vec master = randn(n, 1), m = randn(n, 2, 0.1f), v = randn(n, 3, 0.1f), g = randn(n, 4);
  for (auto& x : v) x = x * x;
  FDev d_master(master), d_m(m), d_v(v), d_g(g);
  BDev d_params(n);
  Bf params(n);
  for (int t = 1; t <= 3; t++) {
    cpu().adamw_update(master.data(), params.data(), m.data(), v.data(), g.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                       0.5f, t);
    gpu().adamw_update(d_master.get(), d_params.get(), d_m.get(), d_v.get(), d_g.get(), n, 3e-3f, 0.9f, 0.95f, 1e-8f,
                       0.1f, 0.5f, t);
  }
  const Vec gm = d_master.host();
  EXPECT_TRUE(allclose(gm, master, 1e-7f, 1e-6f)) << "fp32 master update";
  EXPECT_TRUE(allclose(d_m.host(), m, 1e-7f, 1e-6f));
  EXPECT_TRUE(allclose(d_v.host(), v, 1e-7f, 1e-6f));
  EXPECT_EQ(d_params.host(), to_bf(gm)) << "params = round(master), of the GPU's own master";
}

namespace {

// Two "ranks" of a group as two threads on one GPU, for the model's all-reduce between the kernels' steps
// (row_steps.hpp's `complete`): each all_reduce copies its device values to the host, meets the other at a
// barrier, combines both (sum or max), and writes the result back.
struct TwoRanks {
  std::barrier<> meet{2};
  std::vector<float> host[2];
  struct Ctx {
    TwoRanks* group;
    int rank;
  } ctx[2] = {{this, 0}, {this, 1}};
  static void all_reduce(const Ctx* ctx, float* values, int64_t n, bool max) {
    TwoRanks& g = *ctx->group;
    auto& mine = g.host[ctx->rank];
    mine.resize(static_cast<size_t>(n));
    k::cuda_synchronize();
    // EXPECT, not ASSERT: a rank that returned early would leave the other at the barrier for ever.
    EXPECT_EQ(cudaMemcpy(mine.data(), values, mine.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    g.meet.arrive_and_wait();
    std::vector<float> r(mine.size());
    for (size_t i = 0; i < r.size(); i++)
      r[i] = max ? std::max(g.host[0][i], g.host[1][i]) : g.host[0][i] + g.host[1][i];
    g.meet.arrive_and_wait();  // both have read both before either overwrites its own
    EXPECT_EQ(cudaMemcpy(values, r.data(), r.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    // cudaMemcpy runs on the legacy default stream, which the (non-blocking) compute stream does not
    // wait for: finish the copy before the next step's kernel is queued there.
    k::cuda_synchronize();
  }
  // rank's `complete`
  auto over(int rank) {
    const Ctx* c = &ctx[rank];
    return [c](float* values, int64_t n, bool max) { all_reduce(c, values, n, max); };
  }
};

// Columns [c0, c0 + w) of a row-major [rows, cols] matrix.
Bf columns(const Bf& m, int64_t rows, int cols, int c0, int w) {
  Bf out(static_cast<size_t>(rows) * w);
  for (int64_t r = 0; r < rows; r++)
    std::copy(m.begin() + r * cols + c0, m.begin() + r * cols + c0 + w, out.begin() + r * w);
  return out;
}

}  // namespace

TEST_P(CudaBf16, StepsOverTwoRanksOnDeviceArrays) {
  AXONN_REQUIRE_GPU();
  const int C = GetParam().C, V = GetParam().V, Vp = GetParam().Vp;
  const int64_t N = GetParam().N();
  ASSERT_EQ(C % 2, 0);
  ASSERT_EQ(Vp % 2, 0);
  const int Ch = C / 2, Vh = Vp / 2;
  // LayerNorm over channels split in two halves; cross-entropy over a vocabulary split in two halves.
  Bf x = rand_bf(N * C, 1, 2.0f), w = rand_bf(C, 2), b = rand_bf(C, 3), dy = rand_bf(N * C, 4),
     z = rand_bf(N * Vp, 5, 3.0f);
  auto targets = randint(N, V, 6);
  Bf out(N * C), dinp(N * C, 0), probs(N * Vp);
  Vec mean(N), rstd(N), dw(C, 0.0f), db(C, 0.0f), losses(N);
  Vec sums(2 * N);
  layernorm_steps(cpu(), out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, C);
  layernorm_backward_steps(cpu(), sums.data(), dinp.data(), dw.data(), db.data(), dy.data(), x.data(),
                           w.data(), mean.data(), rstd.data(), N, C, C);
  crossentropy_rows(cpu(), losses.data(), probs.data(), z.data(), targets.data(), N, V, Vp);

  TwoRanks group;
  Bf got_out[2], got_dinp[2], got_probs[2];
  Vec got_mean[2], got_rstd[2], got_dw[2], got_losses[2];
  auto rank = [&](int r) {
    const auto red = group.over(r);
    BDev d_x(columns(x, N, C, r * Ch, Ch)), d_w(Bf(w.begin() + r * Ch, w.begin() + (r + 1) * Ch)),
        d_b(Bf(b.begin() + r * Ch, b.begin() + (r + 1) * Ch)), d_dy(columns(dy, N, C, r * Ch, Ch)), d_out(N * Ch),
        d_dinp(N * Ch), d_z(columns(z, N, Vp, r * Vh, Vh));
    FDev d_mean(N), d_rstd(N), d_dw(Ch), d_db(Ch), d_losses(N), d_sums(2 * N), d_row_values(3 * N);
    IDev d_t(targets);
    layernorm_steps(gpu(), d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_w.get(), d_b.get(), N, Ch, C, red);
    layernorm_backward_steps(gpu(), d_sums.get(), d_dinp.get(), d_dw.get(), d_db.get(), d_dy.get(), d_x.get(),
                             d_w.get(), d_mean.get(), d_rstd.get(), N, Ch, C, red);
    const int begin = r * Vh, valid = std::clamp(V - begin, 0, Vh);
    crossentropy_steps(gpu(), d_row_values.get(), d_losses.get(), d_z.get(), d_z.get(), d_t.get(), N, valid, Vh, begin,
                       red);
    got_out[r] = d_out.host();
    got_dinp[r] = d_dinp.host();
    got_probs[r] = d_z.host();
    got_mean[r] = d_mean.host();
    got_rstd[r] = d_rstd.host();
    got_dw[r] = d_dw.host();
    got_losses[r] = d_losses.host();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  for (int r = 0; r < 2; r++) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(close_bf16(got_out[r], columns(out, N, C, r * Ch, Ch)));
    EXPECT_TRUE(allclose(got_mean[r], mean, 1e-5f, 1e-5f));
    EXPECT_TRUE(allclose(got_rstd[r], rstd, 1e-5f, 1e-5f));
    EXPECT_TRUE(close_bf16(got_dinp[r], columns(dinp, N, C, r * Ch, Ch)));
    EXPECT_TRUE(allclose(got_dw[r], Vec(dw.begin() + r * Ch, dw.begin() + (r + 1) * Ch), 1e-3f, 1e-4f));
    EXPECT_TRUE(allclose(got_losses[r], losses, 1e-5f, 1e-5f)) << "the loss is complete on every rank";
    EXPECT_TRUE(close_bf16(got_probs[r], columns(probs, N, Vp, r * Vh, Vh)));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBf16, ::testing::ValuesIn(kShapes), [](const auto& param) {
  const Shape& s = param.param;
  return "B" + std::to_string(s.B) + "T" + std::to_string(s.T) + "C" + std::to_string(s.C) + "V" +
         std::to_string(s.V);
});
