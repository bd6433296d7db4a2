// train/config_file.hpp: the table of settings, the TOML reader on a string (its errors name the source,
// the line, the section and the key), the writer, and that one reads back what the other writes.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/train/config_file.hpp"
#include "axonn/train/trainer.hpp"
#include "expect_error.hpp"

namespace axonn::train {
namespace {

using test::expect_error_with;

// A config with every field away from its default, each kind of value.
TrainConfig changed() {
  TrainConfig c;
  c.model = "gpt2-tiny";
  c.data = "it's a \"quoted\" path\\with\ttab.bin";
  c.shuffle = true;
  c.data_seed = std::numeric_limits<uint64_t>::max();  // above TOML's largest integer
  c.seed = 7;
  c.synthetic_tokens = int64_t{1} << 40;
  c.steps = 123;
  c.lr = 3e-3f;
  c.eps = 1e-7f;
  c.beta2 = 0.95f;
  c.min_lr_frac = 0.1f;
  c.comm_timeout = 12.5;
  c.exit_after_minutes = 1.0 / 3.0;
  c.layers = -3;  // the reader checks types, not values
  c.run_dir = "runs/x";
  return c;
}

TEST(ConfigFile, EveryFlagHasOneKeyInAKnownSection) {
  std::set<std::string> flags;
  std::set<std::string> sections(config_sections().begin(), config_sections().end());
  for (const ConfigOption& o : config_options()) {
    EXPECT_TRUE(flags.insert(o.flag).second) << o.flag << " twice";
    EXPECT_TRUE(sections.count(o.section)) << o.flag << " in [" << o.section << "]";
    EXPECT_EQ(std::string("--") + o.key(), o.flag);
    EXPECT_FALSE(o.help.empty()) << o.flag;
  }
  EXPECT_GE(flags.size(), 70u);
}

TEST(ConfigFile, WhatIsWrittenReadsBackTheSame) {
  for (const TrainConfig& c : {TrainConfig{}, changed()}) {
    const std::string text = config_toml(c);
    TrainConfig back;
    read_config_toml(back, text, "printed.toml");
    EXPECT_EQ(config_toml(back), text);
    EXPECT_EQ(back.data, c.data);
    EXPECT_EQ(back.data_seed, c.data_seed);
    EXPECT_EQ(back.lr, c.lr);  // bit for bit
    EXPECT_EQ(back.exit_after_minutes, c.exit_after_minutes);
  }
}

TEST(ConfigFile, ReturnsTheFlagsItChangesFromTheDefaults) {
  TrainConfig c;
  const std::set<std::string> set =
      read_config_toml(c, "[training]\nsteps = 50\nbatch-size = 8\n[optimizer]\nlr = 1\n", "run.toml");
  EXPECT_EQ(set, (std::set<std::string>{"--batch-size", "--lr"}));  // steps = 50 is the default
  EXPECT_EQ(c.batch_size, 8);
  EXPECT_EQ(c.lr, 1.0f);  // an integer where a float is wanted
}

TEST(ConfigFile, ErrorsNameTheSourceTheLineAndTheKey) {
  auto read = [](const std::string& text) {
    TrainConfig c;
    read_config_toml(c, text, "run.toml");
  };
  expect_error_with<InvalidArgument>([&] { read("[optimizer]\n\nlr = \"fast\"\n"); },
                                     "run.toml:3: [optimizer] lr: must be a number (the value of --lr), got a string");
  expect_error_with<InvalidArgument>([&] { read("[optimiser]\n"); }, "run.toml:1: [optimiser]: unknown section");
  expect_error_with<InvalidArgument>([&] { read("[data]\nlr = 1\n"); }, "[data] lr: this setting belongs in [optimizer]");
  expect_error_with<InvalidArgument>([&] { read("[training]\nbatch_size = 1\n"); }, "did you mean batch-size");
  expect_error_with<InvalidArgument>([&] { read("[training]\nfoo = 1\n"); }, "unknown key; the keys of [training] are");
  expect_error_with<InvalidArgument>([&] { read("steps = 1\n"); }, "put it under [training]");
  expect_error_with<InvalidArgument>([&] { read("[training]\nsteps = 3000000000\n"); },
                                     "must be an integer in [-2147483648, 2147483647]");
  expect_error_with<InvalidArgument>([&] { read("[training]\nseed = -1\n"); }, "must be an integer in [0, ");
  expect_error_with<InvalidArgument>([&] { read("[data]\nshuffle = 1\n"); }, "must be true or false");
  expect_error_with<InvalidArgument>([&] { read("[optimizer]\nlr = 1e300\n"); }, "too large for a 32-bit float");
  expect_error_with<InvalidArgument>([&] { read("[training\n"); }, "run.toml:1:10: not a valid TOML file");
  expect_error_with<InvalidArgument>([&] { read("[model]\n[model]\n"); }, "not a valid TOML file");
  expect_error_with<InvalidArgument>([&] { read("[model.sub]\n"); }, "[model] sub: unknown key");
}

TEST(ConfigFile, EffectiveConfigLetsTheCommandLineWinAndNamesTheFileOfABadValue) {
  const std::string path = ::testing::TempDir() + "axonn_effective.toml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("[training]\nsteps = 7\nbatch-size = 0\n[optimizer]\nlr = 0.5\n", f);
    std::fclose(f);
  }
  TrainConfig flags;
  flags.batch_size = 2;
  flags.lr = 0.25f;
  const TrainConfig c = effective_config(path, flags, {"--batch-size"});
  EXPECT_EQ(c.steps, 7);        // the file's
  EXPECT_EQ(c.batch_size, 2);   // the command line's
  EXPECT_EQ(c.lr, 0.5f);        // the file's: --lr was not on the command line
  EXPECT_EQ(*c.given, (std::set<std::string>{"--batch-size", "--steps", "--lr"}));
  expect_error_with<InvalidArgument>([&] { effective_config(path, flags, {}); },
                                     "--batch-size must be positive, got 0 (" + path + " sets it: [training] batch-size");
  std::remove(path.c_str());
}

// the config's choices are checked before the run builds anything (here: no grid, no model)
TEST(Compute, DtypeIsCheckedBeforeAnythingRuns) {
  TrainConfig c;
  c.steps = 1;
  c.quiet = true;
  c.peak_gflops = 100;
  c.dtype = "fp16";
  try {
    (void)train(c, comm::world());
    ADD_FAILURE() << "--dtype fp16 ran";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("use fp32 or bf16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace axonn::train
