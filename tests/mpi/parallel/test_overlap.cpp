// The overlap machinery over real MPI ranks: --overlap parsing; WeightGather returns exactly the
// all-gathered blocks whatever the order of uses, with and without prefetch (OAG) and caching;
// ReduceScatterQueue accumulates every reduce-scatter once, oldest first, with a pool smaller than
// the work in flight; GradAllReduce sums packed and in-place buckets; Timeline records collectives
// from issue to completion on their tracks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/overlap.hpp"

namespace axonn::parallel {
namespace {

using Vec = std::vector<float>;

TEST(Overlap, Parse) {
  EXPECT_EQ(parse_overlap("none"), Overlap{});
  EXPECT_EQ(parse_overlap("all"), Overlap::all());
  EXPECT_EQ(parse_overlap("oar,ors,oag,dp"), Overlap::all());
  EXPECT_EQ(parse_overlap("dp,oar"), (Overlap{true, false, false, true}));
  EXPECT_EQ(overlap_name(parse_overlap("dp,oag")), "oag,dp");
  EXPECT_EQ(overlap_name(Overlap::all()), "all");
  EXPECT_EQ(overlap_name({}), "none");
  for (const char* bad : {"", "oar,", "foo", "oar,oar", "none,oar", "all,dp", "OAR", "oar ors"}) {
    try {
      parse_overlap(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--overlap takes none, all, or a comma-separated list of oar, ors, oag, dp"),
                std::string::npos)
          << e.what();
    }
  }
}

// Shards of kinds x layers weights: element j of weight (k, l) on Z rank z is a value that tells
// all three apart, so a block from the wrong weight, layer or Z rank is seen.
struct Weights {
  std::vector<WeightGather::Kind> kinds;
  std::vector<Vec> shards;  // per kind, [layers * shard_size]
  float value(int k, int l, int64_t e) const { return static_cast<float>(k * 100000 + l * 1000 + e); }
};

Weights make_weights(int gz, int z, int layers) {
  Weights w;
  const int64_t blocks[] = {12, 30, 18};  // different sizes: buffers are reused across kinds
  for (int k = 0; k < 3; k++) {
    const int64_t shard = blocks[k] / gz;
    Vec v(static_cast<size_t>(shard * layers));
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < shard; j++) v[static_cast<size_t>(l * shard + j)] = w.value(k, l, z * shard + j);
    w.shards.push_back(std::move(v));
  }
  for (int k = 0; k < 3; k++) w.kinds.push_back({w.shards[k].data(), blocks[k] / gz, blocks[k]});
  return w;
}

TEST(Overlap, WeightGatherReturnsTheBlocksInAnyOrder) {
  auto world = comm::world();
  const int n = world->size();
  if (6 % n != 0) GTEST_SKIP() << "block sizes 12, 30, 18 need Gz dividing 6";
  Grid grid({1, 1, n, 1}, world);
  const int layers = 3;
  Weights w = make_weights(n, grid.coords().z, layers);
  // a forward, a backward with recompute (each weight twice in a row), a pass that starts where the
  // last ended, and one that repeats a weight after others
  std::vector<std::vector<WeightGather::Use>> passes = {
      {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {0, 2}, {1, 2}, {2, 2}},
      {{2, 2}, {1, 2}, {0, 2}, {0, 1}, {1, 1}, {2, 1}, {2, 1}, {1, 1}, {0, 1}},
      {{0, 1}, {2, 0}, {0, 1}, {1, 2}, {1, 2}}};
  for (bool prefetch : {false, true})
    for (bool cache : {false, true}) {
      SCOPED_TRACE(std::string(prefetch ? "prefetch" : "no prefetch") + (cache ? ", cached" : ""));
      Timeline tl;
      WeightGather g(tl, grid.z2(), w.kinds, layers, prefetch, cache);
      float offset = 0.0f;
      for (int round = 0; round < 2; round++) {
        for (const auto& pass : passes) {
          g.begin(pass);
          for (const WeightGather::Use& u : pass) {
            const auto* b = static_cast<const float*>(g.take(u.kind, u.layer));
            int bad = 0;
            for (int64_t e = 0; e < w.kinds[u.kind].block_size; e++)
              if (b[e] != w.value(u.kind, u.layer, e) + offset && bad++ < 2)
                ADD_FAILURE() << "weight (" << u.kind << "," << u.layer << ") element " << e << ": " << b[e];
          }
        }
        // the shards change (an optimizer step): stale blocks must not be returned
        for (Vec& v : w.shards)
          for (float& x : v) x += 0.5f;
        offset += 0.5f;
        g.invalidate();
      }
      for (Vec& v : w.shards)
        for (float& x : v) x -= offset;
      // out of order is a bug in the caller
      g.begin({{0, 0}, {1, 0}});
      EXPECT_THROW(g.take(1, 0), Error);
    }
}

TEST(Overlap, ReduceScatterQueueRetiresOldestFirstWithASmallPool) {
  auto world = comm::world();
  const int n = world->size();
  Grid grid({1, 1, n, 1}, world);
  const int shards = 7;
  const int64_t shard_size = 5, block = shard_size * n;
  for (bool overlap : {false, true}) {
    Timeline tl;
    ReduceScatterQueue q(tl, 2, overlap);  // 7 in flight through 2 slots
    std::vector<Vec> grads(shards, Vec(shard_size, 1.0f));
    for (int round = 0; round < 2; round++)
      for (int s = 0; s < shards; s++) {
        if (n == 1) {
          q.complete_now(s);
          continue;
        }
        float* b = q.block(block);
        for (int64_t e = 0; e < block; e++) EXPECT_EQ(b[e], 0.0f) << "the block is zeroed";
        for (int64_t e = 0; e < block; e++) b[e] = static_cast<float>(s * 1000 + e + grid.coords().z);
        q.issue(grid.z(), b, grads[s].data(), shard_size, s);
        if (!overlap) {
          EXPECT_TRUE(q.empty());
        }
      }
    q.drain();
    EXPECT_TRUE(q.empty());
    std::vector<int> retired = q.take_retired();
    std::vector<int> want;
    for (int round = 0; round < 2; round++)
      for (int s = 0; s < shards; s++) want.push_back(s);
    EXPECT_EQ(retired, want);
    if (n == 1) continue;
    // piece z of the sum over Z ranks r of (s*1000 + e + r), twice, plus the initial 1
    const int z = grid.coords().z;
    for (int s = 0; s < shards; s++)
      for (int64_t j = 0; j < shard_size; j++) {
        const int64_t e = z * shard_size + j;
        const float want_v = 1.0f + 2.0f * static_cast<float>(n * (s * 1000 + e) + n * (n - 1) / 2);
        EXPECT_EQ(grads[s][j], want_v) << "shard " << s << " element " << j;
      }
  }
}

TEST(Overlap, GradAllReduceSumsPackedAndInPlaceBuckets) {
  auto world = comm::world();
  const int n = world->size(), r = world->rank();
  Grid grid({1, 1, 1, n}, world);
  Timeline tl;
  GradAllReduce dp(tl);
  Vec a(3, float(r)), b(5, float(2 * r)), c(1000, 1.0f);
  for (int round = 0; round < 2; round++) {
    std::fill(a.begin(), a.end(), float(r));
    std::fill(b.begin(), b.end(), float(2 * r));
    std::fill(c.begin(), c.end(), 1.0f);
    dp.issue(grid.data(), {{a.data(), 3}, {b.data(), 5}});  // packed
    dp.issue(grid.data(), {{c.data(), 1000}});              // in place
    EXPECT_EQ(dp.pending(), n > 1);
    dp.wait_all();
    EXPECT_FALSE(dp.pending());
    const float sum_r = static_cast<float>(n * (n - 1) / 2);
    for (float x : a) EXPECT_EQ(x, sum_r);
    for (float x : b) EXPECT_EQ(x, 2 * sum_r);
    for (float x : c) EXPECT_EQ(x, float(n));
  }
}

TEST(Overlap, TimelineTracesCollectivesOnTheirTracks) {
  auto world = comm::world();
  const int n = world->size();
  Grid grid({1, 1, n, 1}, world);
  Trace trace;
  Timeline tl;
  tl.set_trace(&trace);
  Vec buf(4096, 1.0f), shard(1024, 1.0f), full(1024 * static_cast<size_t>(n));
  {
    auto w = tl.all_reduce_async(grid.z(), buf.data(), buf.size());  // not recording: not traced
    w->wait();
  }
  trace.set_recording(true);
  trace.set_step(3);
  {
    auto c = tl.compute("matmul_forward");
    auto w = tl.all_gather_async(grid.z2(), shard.data(), full.data(), shard.size());
    tl.all_reduce(grid.z(), buf.data(), buf.size());
    w->wait();
    EXPECT_TRUE(w->test());
  }
  trace.set_recording(false);
  std::vector<Trace::Span> spans = trace.spans();
  int compute = 0, gather = 0, reduce = 0;
  for (const Trace::Span& s : spans) {
    EXPECT_EQ(s.step, 3);
    EXPECT_LE(s.begin_us, s.end_us);
    if (s.kind == SpanKind::kCompute) compute++;
    if (s.track == "z2 all_gather") {
      gather++;
      EXPECT_FALSE(s.blocking);
      EXPECT_EQ(s.bytes, 1024 * 4);
    }
    if (s.track == "z all_reduce") {
      reduce++;
      EXPECT_TRUE(s.blocking);
    }
  }
  EXPECT_EQ(compute, 1);
  EXPECT_EQ(gather, n > 1 ? 1 : 0) << "a group of one rank sends nothing and is not traced";
  EXPECT_EQ(reduce, n > 1 ? 1 : 0);
  for (float x : full) EXPECT_EQ(x, 1.0f);
}

}  // namespace
}  // namespace axonn::parallel
