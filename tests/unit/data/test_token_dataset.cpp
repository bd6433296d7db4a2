#include <gtest/gtest.h>

#include "axonn/core/error.hpp"
#include "axonn/data/token_dataset.hpp"
#include "expect_error.hpp"
#include "llmc_files.hpp"

using namespace axonn;
using data::BatchLoader;
using data::TokenShard;

namespace {
std::vector<uint32_t> iota_tokens(int n, int mod) {
  std::vector<uint32_t> v(n);
  for (int i = 0; i < n; i++) v[i] = (uint32_t)(i % mod);
  return v;
}

}  // namespace

TEST(TokenShard, ReadsGpt2AndLlama3Shards) {
  test::TempDir d;
  test::write_shard(d.file("a.bin"), iota_tokens(100, 50));
  TokenShard a(d.file("a.bin"), 50);
  EXPECT_EQ(a.size(), 100);
  EXPECT_EQ(a.token(57), 7);
  test::write_shard(d.file("b.bin"), {70000, 1, 2}, 20240801, 7, -1, true);
  TokenShard b(d.file("b.bin"), 128256);
  EXPECT_EQ(b.token(0), 70000);
}

TEST(TokenShard, RejectsBadFilesWithClearErrors) {
  test::TempDir d;
  test::expect_error_with([&] { TokenShard s(d.file("missing.bin"), 10); }, "cannot open");
  test::write_bytes(d.file("short.bin"), std::vector<char>(100, 0));
  test::expect_error_with([&] { TokenShard s(d.file("short.bin"), 10); }, "shorter than the 1024-byte");
  test::write_shard(d.file("magic.bin"), iota_tokens(10, 5), 12345);
  test::expect_error_with([&] { TokenShard s(d.file("magic.bin"), 10); }, "magic 12345");
  test::write_shard(d.file("version.bin"), iota_tokens(10, 5), 20240520, 2);
  test::expect_error_with([&] { TokenShard s(d.file("version.bin"), 10); }, "version 2");
  test::write_shard(d.file("trunc.bin"), iota_tokens(10, 5), 20240520, 1, 20);
  test::expect_error_with([&] { TokenShard s(d.file("trunc.bin"), 10); }, "truncated");
  test::write_shard(d.file("vocab.bin"), {1, 2, 3, 9, 4});
  test::expect_error_with([&] { TokenShard s(d.file("vocab.bin"), 9); }, "token id 9 at position 3");
}

TEST(BatchLoader, ReadsSequentialWindowsAndWraps) {
  test::TempDir d;
  test::write_shard(d.file("t.bin"), iota_tokens(23, 1000));
  TokenShard s(d.file("t.bin"), 1000);
  BatchLoader loader(s, 2, 5);  // B*T = 10: batches at 0 and 10; 20 + 11 > 23 wraps to 0
  std::vector<int> in(10), tg(10);
  loader.next(in.data(), tg.data());
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(in[9], 9);
  EXPECT_EQ(tg[9], 10);
  loader.next(in.data(), tg.data());
  EXPECT_EQ(in[0], 10);
  EXPECT_EQ(tg[9], 20);
  loader.next(in.data(), tg.data());
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(loader.position(), 6);  // sequences consumed
}

TEST(BatchLoader, RejectsShardShorterThanOneBatch) {
  test::TempDir d;
  test::write_shard(d.file("t.bin"), iota_tokens(10, 100));
  TokenShard s(d.file("t.bin"), 100);
  EXPECT_THROW(BatchLoader(s, 2, 5), InvalidArgument);  // needs 11 tokens
  EXPECT_NO_THROW(BatchLoader(s, 3, 3));
}

TEST(SyntheticCorpus, IsDeterministicAndInVocabulary) {
  auto a = data::synthetic_markov_tokens(37, 5000, 1), b = data::synthetic_markov_tokens(37, 5000, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, data::synthetic_markov_tokens(37, 5000, 2));
  for (uint32_t t : a) ASSERT_LT(t, 37u);
  TokenShard s(std::move(a));
  EXPECT_EQ(s.size(), 5000);
}
