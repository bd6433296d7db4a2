#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "axonn/core/error.hpp"
#include "axonn/data/token_dataset.hpp"
#include "expect_error.hpp"
#include "llmc_files.hpp"

using namespace axonn;
using data::BatchLoader;
using data::TokenCorpus;

namespace {

// llm.c's sequential loader (dataloader.h, one process, no shuffle), written from its description:
// batch at token p = i*B*T; when p + B*T + 1 passes the end, back to p = 0.
struct LlmcLoader {
  const std::vector<uint32_t>& tokens;
  int64_t B, T, p = 0;
  void next(std::vector<int>& in, std::vector<int>& tg) {
    if (p + B * T + 1 > static_cast<int64_t>(tokens.size())) p = 0;
    for (int64_t i = 0; i < B * T; i++) {
      in[static_cast<size_t>(i)] = static_cast<int>(tokens[static_cast<size_t>(p + i)]);
      tg[static_cast<size_t>(i)] = static_cast<int>(tokens[static_cast<size_t>(p + i + 1)]);
    }
    p += B * T;
  }
};

std::vector<uint32_t> counting(int n, uint32_t base = 0) {
  std::vector<uint32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) v[static_cast<size_t>(i)] = base + static_cast<uint32_t>(i);
  return v;
}

// A corpus of shards on disk whose token i of shard s is s*1000 + i: a token says where it is from.
struct Shards {
  test::TempDir dir;
  std::vector<std::string> paths;
  explicit Shards(const std::vector<int>& sizes) {
    for (size_t s = 0; s < sizes.size(); s++) {
      paths.push_back(dir.file("train_00000" + std::to_string(s) + ".bin"));
      test::write_shard(paths.back(), counting(sizes[s], static_cast<uint32_t>(1000 * s)), 20240520, 1, -1, false);
    }
  }
};

}  // namespace

TEST(BatchLoader, OneShardIsLlmcsSequentialLoaderBitForBit) {
  for (auto [n, B, T] : {std::tuple{23, 2, 5}, {20000, 4, 32}, {1000, 3, 7}, {101, 4, 25}}) {
    const std::vector<uint32_t> tokens = counting(n);
    TokenCorpus corpus(std::make_unique<data::TokenShard>(tokens));
    BatchLoader ours(corpus, B, T);
    LlmcLoader ref{tokens, B, T};
    std::vector<int> a(static_cast<size_t>(B * T)), at(a.size()), b(a.size()), bt(a.size());
    for (int i = 0; i < 500; i++) {
      ours.next(a.data(), at.data());
      ref.next(b, bt);
      ASSERT_EQ(a, b) << "n=" << n << " B=" << B << " T=" << T << " batch " << i;
      ASSERT_EQ(at, bt) << "n=" << n << " B=" << B << " T=" << T << " batch " << i;
    }
    EXPECT_EQ(ours.position(), 500 * B);
  }
}

TEST(BatchLoader, ReadsManyShardsInOrderWithoutCrossingThem) {
  Shards s({23, 10, 41});  // T = 5: 4, 1 and 8 sequences; S = 13, B = 3: U = 12
  TokenCorpus corpus(s.paths, 0);
  EXPECT_EQ(corpus.num_tokens(), 74);
  BatchLoader loader(corpus, 3, 5);
  EXPECT_EQ(loader.sequences(), 13);
  EXPECT_EQ(loader.sequences_per_epoch(), 12);
  std::vector<int> in(15), tg(15);
  std::vector<int> firsts;
  for (int batch = 0; batch < 8; batch++) {  // two epochs
    loader.next(in.data(), tg.data());
    for (int b = 0; b < 3; b++) {
      const int first = in[static_cast<size_t>(b * 5)];
      firsts.push_back(first);
      for (int i = 0; i < 5; i++) {  // consecutive tokens of one shard, targets one ahead
        EXPECT_EQ(in[static_cast<size_t>(b * 5 + i)], first + i);
        EXPECT_EQ(tg[static_cast<size_t>(b * 5 + i)], first + i + 1);
      }
      const int64_t global = loader.last_batch_starts()[static_cast<size_t>(b)];
      EXPECT_EQ(corpus.token(global), first);
    }
  }
  const std::vector<int> epoch = {0, 5, 10, 15, 1000, 2000, 2005, 2010, 2015, 2020, 2025, 2030};  // 2035 dropped
  std::vector<int> both = epoch;
  both.insert(both.end(), epoch.begin(), epoch.end());
  EXPECT_EQ(firsts, both);
}

TEST(BatchLoader, ShuffledEpochsArePermutationsThatDependOnlyOnTheSeed) {
  Shards s({61, 40, 100});  // T = 4: 15 + 9 + 24 = 48 sequences; B = 4: every sequence once per epoch
  TokenCorpus corpus(s.paths, 0);
  auto epoch_order = [&](uint64_t seed, int epochs) {
    BatchLoader l(corpus, 4, 4, {true, seed});
    std::vector<int> in(16), tg(16);
    std::vector<std::vector<int64_t>> orders(static_cast<size_t>(epochs));
    for (int e = 0; e < epochs; e++)
      for (int batch = 0; batch < 12; batch++) {
        l.next(in.data(), tg.data());
        for (int64_t g : l.last_batch_starts()) orders[static_cast<size_t>(e)].push_back(g);
      }
    return orders;
  };
  const auto a = epoch_order(7, 3), again = epoch_order(7, 3), other = epoch_order(8, 1);
  EXPECT_EQ(a, again);
  BatchLoader sequential(corpus, 4, 4);
  std::set<int64_t> all;
  for (int64_t n = 0; n < 48; n++) all.insert(sequential.sequence_start(n));
  for (const auto& order : a) EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()), all) << "not a permutation";
  EXPECT_NE(a[0], a[1]) << "every epoch has its own order";
  EXPECT_NE(a[0], other[0]) << "another seed, another order";
  std::vector<int64_t> in_order(all.begin(), all.end());
  EXPECT_NE(a[0], in_order);
}

TEST(BatchLoader, PositionIsAPureFunctionOfTheSequencesConsumed) {
  Shards s({97, 13, 230, 55});
  TokenCorpus corpus(s.paths, 0);
  for (bool shuffle : {false, true}) {
    BatchLoader first(corpus, 3, 8, {shuffle, 42});
    std::vector<int> in(24), tg(24), rin(24), rtg(24);
    for (int i = 0; i < 37; i++) first.next(in.data(), tg.data());  // past a shard boundary and an epoch
    BatchLoader resumed(corpus, 3, 8, {shuffle, 42});
    resumed.set_position(first.position());
    for (int i = 0; i < 50; i++) {
      first.next(in.data(), tg.data());
      resumed.next(rin.data(), rtg.data());
      ASSERT_EQ(in, rin) << "shuffle " << shuffle << ", batch " << i << " after resuming";
      ASSERT_EQ(tg, rtg);
    }
    EXPECT_THROW(resumed.set_position(-1), InvalidArgument);
  }
}

TEST(TokenCorpus, DocumentStartsAcrossShards) {
  test::TempDir d;
  test::write_shard(d.file("a.bin"), {9, 1, 2, 9, 3});
  test::write_shard(d.file("b.bin"), {4, 9, 5, 6});  // the first document runs on into this shard
  TokenCorpus corpus({d.file("a.bin"), d.file("b.bin")}, 10);
  EXPECT_EQ(corpus.document_starts(9), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(corpus.token(5), 4);
  EXPECT_EQ(corpus.describe(), "2 shards, " + d.file("a.bin") + " .. " + d.file("b.bin"));
  test::write_shard(d.file("c.bin"), {1, 2, 30});
  test::expect_error_with([&] { TokenCorpus c({d.file("a.bin"), d.file("c.bin")}, 10); }, "token id 30 at position 2");
}

TEST(BatchLoader, RefusesACorpusShorterThanOneBatch) {
  Shards s({9, 9, 9});  // T = 4: 2 sequences each, 6 in all
  TokenCorpus corpus(s.paths, 0);
  EXPECT_NO_THROW(BatchLoader(corpus, 6, 4));
  test::expect_error_with<InvalidArgument>([&] { BatchLoader l(corpus, 7, 4); },
                                           "the 3 token shards hold 6 sequences of T+1 = 5 tokens");
}

TEST(FindShards, DirectoriesGlobsAndFiles) {
  test::TempDir d;
  for (const char* f : {"train_000001.bin", "train_000000.bin", "val_000000.bin", "prepare.json", "notes.bin.txt"})
    test::write_bytes(d.file(f), {'x'});
  EXPECT_EQ(data::find_shards(d.file("")), (std::vector<std::string>{d.file("train_000000.bin"), d.file("train_000001.bin")}));
  EXPECT_EQ(data::find_shards(d.file(""), data::ShardSplit::kVal), (std::vector<std::string>{d.file("val_000000.bin")}));
  EXPECT_EQ(data::find_shards(d.file("*_000000.bin")),
            (std::vector<std::string>{d.file("train_000000.bin"), d.file("val_000000.bin")}));
  EXPECT_EQ(data::find_shards(d.file("one.bin")), (std::vector<std::string>{d.file("one.bin")}));
  test::expect_error_with([&] { data::find_shards(d.file("nothing_*.bin")); }, "no token shards match");
  test::TempDir empty;
  test::expect_error_with([&] { data::find_shards(empty.file("")); }, "has no training token shards");
}
