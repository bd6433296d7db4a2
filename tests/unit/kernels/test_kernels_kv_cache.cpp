// The KV-cache kernels of inference (kv_cache_append, attention_cached_forward): cpu against ref, and
// both against the training attention (attention_forward, on repeat_kv_forward's repeated heads for
// grouped-query attention) on the same q|k|v: the whole sequence as one chunk (prefill), and as a
// prefix chunk followed by one position at a time (decode).
#include <gtest/gtest.h>

#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "tensor_expect.hpp"

namespace k = axonn::kernels;
using axonn::test::allclose;
using axonn::test::randn;
using Vec = std::vector<float>;

namespace {

constexpr int B = 2, T = 11, HS = 4;

struct Heads {
  int NH, NKV;
};

// The training attention on the whole sequence: out [B*T, NH*HS].
Vec training_attention(const Vec& qkv, Heads h) {
  const k::Ops& ops = k::ops_for(k::Backend::kRef);
  const int64_t N = static_cast<int64_t>(B) * T;
  const int Q = h.NH * HS;
  Vec rep(static_cast<size_t>(N) * 3 * Q), out(static_cast<size_t>(N) * Q),
      att(static_cast<size_t>(B) * h.NH * T * T);
  ops.repeat_kv_forward(rep.data(), qkv.data(), N, h.NH, h.NKV, HS);
  ops.attention_forward(out.data(), att.data(), rep.data(), B, T, Q, h.NH);
  return out;
}

// The cached attention over chunks of the given lengths (summing to T), in order: out [B*T, NH*HS]. E is
// float (Ops) or bf16 (OpsBf16: q|k|v and the cache in bf16).
template <class E>
std::vector<E> cached_attention(const k::OpTable<E>& ops, const std::vector<E>& qkv, Heads h,
                                const std::vector<int>& chunks, int Tc) {
  using V = std::vector<E>;
  const int Q = h.NH * HS, K = h.NKV * HS, W = Q + 2 * K;
  V kc(static_cast<size_t>(B) * Tc * K, E{7}), vc(kc.size(), E{7}), out(static_cast<size_t>(B) * T * Q);
  int pos = 0;
  for (int n : chunks) {
    // the chunk's rows [B, n] out of the sequence's [B, T]
    V in(static_cast<size_t>(B) * n * W), o(static_cast<size_t>(B) * n * Q);
    for (int b = 0; b < B; b++)
      for (int i = 0; i < n; i++)
        for (int j = 0; j < W; j++)
          in[(static_cast<size_t>(b) * n + i) * W + j] = qkv[(static_cast<size_t>(b) * T + pos + i) * W + j];
    ops.kv_cache_append(kc.data(), vc.data(), in.data(), B, n, pos, Tc, h.NH, h.NKV, HS);
    ops.attention_cached_forward(o.data(), in.data(), kc.data(), vc.data(), B, n, pos, Tc, h.NH, h.NKV, HS);
    for (int b = 0; b < B; b++)
      for (int i = 0; i < n; i++)
        for (int j = 0; j < Q; j++)
          out[(static_cast<size_t>(b) * T + pos + i) * Q + j] = o[(static_cast<size_t>(b) * n + i) * Q + j];
    pos += n;
  }
  return out;
}

}  // namespace

TEST(KvCache, CachedAttentionMatchesTrainingAttentionInAnyChunking) {
  // multi-head (NKV = NH) and grouped-query attention; the cache longer than the sequence (its
  // unused positions hold garbage that must not be read)
  for (Heads h : {Heads{3, 3}, Heads{4, 2}, Heads{4, 1}}) {
    SCOPED_TRACE(testing::Message() << "NH " << h.NH << " NKV " << h.NKV);
    const Vec qkv = randn(static_cast<size_t>(B) * T * (h.NH + 2 * h.NKV) * HS, 5);
    const Vec want = training_attention(qkv, h);
    const std::vector<std::vector<int>> chunkings = {{T}, {4, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                                     {5, 6}};
    for (k::Backend backend : {k::Backend::kRef, k::Backend::kCpu})
      for (const auto& chunks : chunkings) {
        SCOPED_TRACE(testing::Message() << k::backend_name(backend) << ", " << chunks.size() << " chunks");
        EXPECT_TRUE(allclose(cached_attention(k::ops_for(backend), qkv, h, chunks, T + 3), want, 1e-6f, 1e-5f));
      }
  }
}

// bf16 (generate --dtype bf16): the cache holds bf16 keys and values and the products and softmax run in
// fp32, so the cached attention on bf16 q|k|v is the fp32 training attention on the same (widened) values
// rounded once: within one bf16 rounding of it, in any chunking, for ref_bf16 and cpu_bf16.
TEST(KvCache, Bf16CachedAttentionIsTheFp32OneRoundedOnce) {
  for (Heads h : {Heads{3, 3}, Heads{4, 2}, Heads{4, 1}}) {
    SCOPED_TRACE(testing::Message() << "NH " << h.NH << " NKV " << h.NKV);
    const Vec drawn = randn(static_cast<size_t>(B) * T * (h.NH + 2 * h.NKV) * HS, 5);
    std::vector<k::bf16> qkv(drawn.size());
    Vec widened(drawn.size());
    for (size_t i = 0; i < drawn.size(); i++) {
      qkv[i] = axonn::f32_to_bf16(drawn[i]);
      widened[i] = axonn::bf16_to_f32(qkv[i]);
    }
    const Vec want = training_attention(widened, h);
    for (const k::OpsBf16* ops : {&k::ref_bf16_ops(), &k::cpu_bf16_ops()})
      for (const std::vector<int>& chunks : std::vector<std::vector<int>>{{T}, {4, 1, 1, 1, 1, 1, 1, 1}, {5, 6}}) {
        SCOPED_TRACE(testing::Message() << (ops == &k::ref_bf16_ops() ? "ref_bf16" : "cpu_bf16") << ", "
                                        << chunks.size() << " chunks");
        const std::vector<k::bf16> got = cached_attention(*ops, qkv, h, chunks, T + 3);
        Vec got32(got.size());
        for (size_t i = 0; i < got.size(); i++) got32[i] = axonn::bf16_to_f32(got[i]);
        EXPECT_TRUE(allclose(got32, want, 1e-5f, 1.0f / 256));  // one rounding: relative 2^-8 at most
      }
  }
}

TEST(KvCache, AppendWritesOnlyTheChunksPositions) {
  const Heads h{4, 2};
  const int Q = h.NH * HS, K = h.NKV * HS, n = 2, pos = 3, Tc = 7;
  const Vec qkv = randn(static_cast<size_t>(B) * n * (Q + 2 * K), 9);
  for (k::Backend backend : {k::Backend::kRef, k::Backend::kCpu}) {
    Vec kc(static_cast<size_t>(B) * Tc * K, -1.0f), vc(kc.size(), -1.0f);
    k::ops_for(backend).kv_cache_append(kc.data(), vc.data(), qkv.data(), B, n, pos, Tc, h.NH, h.NKV, HS);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < Tc; t++)
        for (int j = 0; j < K; j++) {
          const size_t c = (static_cast<size_t>(b) * Tc + t) * K + j;
          const bool mine = t >= pos && t < pos + n;
          const size_t row = (static_cast<size_t>(b) * n + (t - pos)) * (Q + 2 * K);
          ASSERT_EQ(kc[c], mine ? qkv[row + Q + j] : -1.0f) << k::backend_name(backend) << " b " << b << " t " << t;
          ASSERT_EQ(vc[c], mine ? qkv[row + Q + K + j] : -1.0f) << k::backend_name(backend) << " b " << b << " t " << t;
        }
  }
}
