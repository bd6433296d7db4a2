// The Goldfish drop mask (model/goldfish.hpp): the spec's hash vectors, committed decisions of an
// independent Python oracle (tests/golden/goldfish/gen_goldfish_golden.py), and the mask's properties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/model/goldfish.hpp"
#include "common/data_dirs.hpp"

namespace m = axonn::model;

namespace {

std::vector<int> dropped_positions(const m::GoldfishMask& mask, const std::vector<int>& row) {
  std::vector<uint8_t> keep(row.size());
  mask.apply(row.data(), 1, static_cast<int>(row.size()), keep.data());
  std::vector<int> out;
  for (size_t p = 0; p < row.size(); p++)
    if (!keep[p]) out.push_back(static_cast<int>(p));
  return out;
}

m::GoldfishConfig avalanche(int k, int h) {
  m::GoldfishConfig g;
  g.k = k;
  g.h = h;
  return g;
}

std::vector<int> ints(const std::string& text) {
  std::istringstream in(text);
  std::vector<int> v;
  for (long x; in >> x;) v.push_back(static_cast<int>(x));
  return v;
}

const std::string kGolden = ::axonn::test::golden_file("goldfish");

}  // namespace

TEST(Goldfish, HashVectorsOfTheSpec) {
  // spec §13.1(7) and models-text-goldfish.md §1.5
  EXPECT_EQ(m::goldfish_hashint32(0), 791250447u);
  EXPECT_EQ(m::goldfish_hashint32(1), 4151993710u);
  EXPECT_EQ(m::goldfish_hashint32(2), 2228655750u);
  EXPECT_EQ(m::goldfish_hashint32(3), 1987753757u);
  EXPECT_EQ(m::goldfish_hashint32(210), 574884826u);
  EXPECT_EQ(m::goldfish_hashint32(12345), 1193736519u);
  EXPECT_EQ(m::goldfish_hashint32(1422948384), 2460261570u);
  EXPECT_EQ(m::goldfish_hashint32(0xffffffffULL), 58270011u);
  EXPECT_EQ(m::goldfish_hashint32(1ULL << 63), 791250447u);  // only the low 32 bits count
}

TEST(Goldfish, DropVectorsOfTheSpec) {
  std::vector<int> counting;
  for (int i = 1; i <= 20; i++) counting.push_back(i);
  EXPECT_EQ(dropped_positions(m::GoldfishMask(avalanche(4, 4)), counting), (std::vector<int>{3, 6, 11, 12, 19}));
  EXPECT_EQ(dropped_positions(m::GoldfishMask(avalanche(4, 13)), counting), (std::vector<int>{15, 16}));
  const std::vector<int> gpt2 = {50256, 464, 2068, 7586, 21831, 18045, 625, 262,
                                 16931, 3290, 13, 50256, 464, 2068, 7586, 21831};
  EXPECT_EQ(dropped_positions(m::GoldfishMask(avalanche(4, 4)), gpt2), (std::vector<int>{4, 5, 15}));
  m::GoldfishConfig s;
  s.k = 4;
  s.strategy = m::GoldfishStrategy::kStatic;
  EXPECT_EQ(dropped_positions(m::GoldfishMask(s), std::vector<int>(16, 7)), (std::vector<int>{0, 4, 8, 12}));
}

TEST(Goldfish, CommittedDecisionsOfThePythonOracle) {
  std::ifstream in(kGolden + "/drops.txt");
  ASSERT_TRUE(in) << kGolden << "/drops.txt";
  int cases = 0;
  std::map<std::string, int> per_strategy;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t bar1 = line.find('|'), bar2 = line.find('|', bar1 + 1);
    ASSERT_NE(bar2, std::string::npos) << line;
    std::istringstream head(line.substr(0, bar1));
    std::string strategy;
    m::GoldfishConfig g;
    head >> strategy >> g.k >> g.h >> g.start;
    g.strategy = m::parse_goldfish_strategy(strategy);
    if (g.strategy == m::GoldfishStrategy::kHashTable) g.table = kGolden + "/table-1009.f32";
    const std::vector<int> row = ints(line.substr(bar1 + 1, bar2 - bar1 - 1));
    const std::vector<int> want = ints(line.substr(bar2 + 1));
    EXPECT_EQ(dropped_positions(m::GoldfishMask(g), row), want) << line.substr(0, 60);
    cases++;
    per_strategy[strategy]++;
  }
  EXPECT_EQ(cases, 60);
  EXPECT_EQ(per_strategy["hash-avalanche"], 30);
  EXPECT_EQ(per_strategy["hash-table"], 20);
  EXPECT_EQ(per_strategy["static"], 10);
}

TEST(Goldfish, DropFractionIsOneInKOverRandomTokens) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, 50256);
  const int rows = 200, T = 256, h = 13;
  std::vector<int> targets(static_cast<size_t>(rows) * T);
  for (int& t : targets) t = token(rng);
  for (m::GoldfishStrategy s : {m::GoldfishStrategy::kHashAvalanche, m::GoldfishStrategy::kHashTable}) {
    for (int k : {2, 4, 8}) {
      m::GoldfishConfig g = avalanche(k, h);
      g.strategy = s;
      if (s == m::GoldfishStrategy::kHashTable) g.table = kGolden + "/table-1009.f32";
      std::vector<uint8_t> keep(targets.size());
      const int64_t kept = m::GoldfishMask(g).apply(targets.data(), rows, T, keep.data());
      const double eligible = static_cast<double>(rows) * (T - (h - 1));  // the first h-1 are never dropped
      const double dropped = static_cast<double>(targets.size()) - kept;
      // hash-table: the fraction of the (small, 1009-entry) table's values below 1/k, which the index spreads over
      double p = 1.0 / k;
      if (s == m::GoldfishStrategy::kHashTable) {
        const std::vector<float> table = m::load_goldfish_table(g.table);
        p = 0;
        for (float v : table) p += v < static_cast<float>(1.0 / k) ? 1.0 / static_cast<double>(table.size()) : 0.0;
        EXPECT_NEAR(p, 1.0 / k, 0.05) << "the table is uniform";
      }
      const double sigma = std::sqrt(eligible * p * (1 - p));
      EXPECT_NEAR(dropped, eligible * p, 3 * sigma) << m::goldfish_strategy_name(s) << " k=" << k;
    }
  }
}

TEST(Goldfish, NoDropsBeforePositionHMinusOne) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> token(0, 9);
  for (int h : {1, 4, 13}) {
    const int rows = 300, T = 32;
    std::vector<int> targets(static_cast<size_t>(rows) * T);
    for (int& t : targets) t = token(rng);
    std::vector<uint8_t> keep(targets.size());
    m::GoldfishMask(avalanche(2, h)).apply(targets.data(), rows, T, keep.data());
    int early_drops = 0, late_drops = 0;
    for (int r = 0; r < rows; r++)
      for (int p = 0; p < T; p++) (p < h - 1 ? early_drops : late_drops) += keep[static_cast<size_t>(r) * T + p] ? 0 : 1;
    EXPECT_EQ(early_drops, 0) << "h=" << h;
    EXPECT_GT(late_drops, 0) << "h=" << h;
  }
}

TEST(Goldfish, SameHGramSameDecisionAnywhere) {
  // One h-gram planted at different positions of different rows of random text: one decision.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> token(1, 50256);
  const int h = 13, T = 64, rows = 40;
  for (int k : {2, 4}) {
    int drops_of_grams = 0;
    for (int trial = 0; trial < 20; trial++) {
      std::vector<int> gram(h);
      for (int& t : gram) t = token(rng);
      std::vector<int> targets(static_cast<size_t>(rows) * T);
      for (int& t : targets) t = token(rng);
      std::vector<int> ends;
      for (int r = 0; r < rows; r++) {
        const int at = r % (T - h + 1);  // the gram's first position in row r
        for (int j = 0; j < h; j++) targets[static_cast<size_t>(r) * T + at + j] = gram[j];
        ends.push_back(r * T + at + h - 1);
      }
      std::vector<uint8_t> keep(targets.size());
      m::GoldfishMask(avalanche(k, h)).apply(targets.data(), rows, T, keep.data());
      for (int e : ends) EXPECT_EQ(keep[static_cast<size_t>(e)], keep[static_cast<size_t>(ends[0])]) << e;
      drops_of_grams += keep[static_cast<size_t>(ends[0])] ? 0 : 1;
    }
    EXPECT_GT(drops_of_grams, 0) << "k=" << k;  // the check saw both decisions
    EXPECT_LT(drops_of_grams, 20) << "k=" << k;
  }
}

TEST(Goldfish, BadConfigAndTableErrors) {
  auto refuses = [](const m::GoldfishConfig& g, const std::string& what) {
    try {
      m::GoldfishMask mask(g);
      ADD_FAILURE() << "accepted, wanted an error naming " << what;
    } catch (const axonn::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refuses(avalanche(1, 13), "--goldfish-k");
  refuses(avalanche(0, 13), "--goldfish-k");
  refuses(avalanche(4, 0), "--goldfish-h");
  m::GoldfishConfig t = avalanche(4, 13);
  t.strategy = m::GoldfishStrategy::kHashTable;
  refuses(t, "--goldfish-table");
  m::GoldfishConfig extra = avalanche(4, 13);
  extra.table = kGolden + "/table-1009.f32";
  refuses(extra, "--goldfish-table");
  EXPECT_THROW(m::parse_goldfish_strategy("hash"), axonn::InvalidArgument);

  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::vector<float>& values, int extra_bytes) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
    for (int i = 0; i < extra_bytes; i++) out.put(0);
    return path;
  };
  t.table = write("odd.f32", {0.5f, 0.25f}, 2);
  refuses(t, "float32");
  t.table = write("empty.f32", {}, 0);
  refuses(t, "float32");
  t.table = write("range.f32", {0.5f, 1.0f}, 0);
  refuses(t, "[0, 1)");
  t.table = write("nan.f32", {std::nanf("")}, 0);
  refuses(t, "[0, 1)");
  t.table = dir + "/missing.f32";
  EXPECT_THROW(m::GoldfishMask{t}, axonn::IoError);
  t.table = write("good.f32", {0.1f, 0.9f}, 0);
  EXPECT_NO_THROW(m::GoldfishMask{t});
}
