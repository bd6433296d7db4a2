// Sharded checkpoints on real MPI ranks (1, 2 and 4):
//  - model::ShardMap gives every grid's shards exactly as model::Gpt lays them out;
//  - a state saved on any grid loads on every grid of the world and on one rank, params and both AdamW
//    moments, every element bit for bit where the target's layout puts it (resharding is data movement);
//  - corrupt, truncated, missing, incomplete, mismatched and weights-only checkpoints are refused on
//    every rank with a message naming the file and the problem, before any state is changed;
//  - training resumed from a checkpoint reproduces the uninterrupted run bit for bit on the same grid
//    (cosine schedule, warmup, weight decay, clipping on): every loss, lr, gradient norm, and the final
//    params and moments; --resume takes the latest checkpoint;
//  - on 4 ranks, a run continued 2,1,2,1 -> 1,2,1,2 -> one rank keeps the uninterrupted losses (2e-4).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/model/shard_map.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/train/trainer.hpp"
#include "common/data_dirs.hpp"
#include "common/shared_tmp_dir.hpp"

namespace axonn {
namespace {

namespace ck = checkpoint;
namespace fs = std::filesystem;
using model::Param;

// An odd little model: the vocabulary (130 rows) splits unevenly over X*Y.
model::GptConfig odd_config() {
  model::GptConfig c;
  c.max_seq_len = 9;
  c.vocab_size = 70;
  c.padded_vocab_size = 130;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 16;
  return c;
}

// The same as a Llama: grouped-query attention (its q|k|v linear's parts unequal), an untied head.
model::GptConfig odd_llama_config() {
  model::GptConfig c = odd_config();
  c.family = model::Family::kLlama;
  c.num_kv_heads = 2;
  c.ffn_hidden = 24;
  c.tied_embeddings = false;
  return c;
}
const model::GptConfig kOddConfigs[] = {odd_config(), odd_llama_config()};

// Every grid of n ranks that the model admits.
std::vector<parallel::GridShape> grids_of(int n, const model::GptConfig& c) {
  std::vector<parallel::GridShape> out;
  for (int gx = 1; gx <= n; ++gx)
    for (int gy = 1; gx * gy <= n; ++gy)
      for (int gz = 1; gx * gy * gz <= n; ++gz) {
        if (n % (gx * gy * gz) != 0) continue;
        parallel::GridShape s{gx, gy, gz, n / (gx * gy * gz)};
        try {
          model::ShardMap(c, s, {0, 0, 0, 0});
          out.push_back(s);
        } catch (const InvalidArgument&) {
        }
      }
  return out;
}

std::shared_ptr<comm::Communicator> self_comm() {
  static std::shared_ptr<comm::Communicator> self(comm::world()->split(comm::world()->rank(), 0, "self"));
  return self;
}

using test::SharedTmpDir;

// On rank 0 only, then a barrier: file-system changes every rank then sees.
void on_rank0(const std::function<void()>& f) {
  if (comm::world()->rank() == 0) f();
  comm::world()->barrier();
}

// --- states laid out by a ShardMap, with values that say where they belong ---------------------------

Arena shard_arena(const model::ShardMap& map, const std::string& name) {
  Arena a(name);
  for (int i = 0; i < static_cast<int>(map.size()); i++) a.reserve(map.spec().params[static_cast<size_t>(i)].name, map.shard_shape(i));
  a.allocate();
  return a;
}

// A value that depends only on (state, tensor, layer, element of the full tensor's layer).
float tag(int state, int p, int layer, int64_t g) {
  uint64_t x = (static_cast<uint64_t>(state) << 56) ^ (static_cast<uint64_t>(p) << 48) ^
               (static_cast<uint64_t>(layer) << 40) ^ static_cast<uint64_t>(g);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) / 16777216.0f;
}

template <typename F>
void for_each_element(const model::ShardMap& map, Arena& a, F f) {
  for (int i = 0; i < static_cast<int>(map.size()); i++) {
    const auto p = static_cast<Param>(i);
    float* w = a.tensor(static_cast<size_t>(i)).f32();
    const int layers = map.spec().params[static_cast<size_t>(p)].per_layer ? map.config().num_layers : 1;
    const int64_t n = map.shard_layer_numel(p);
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < n; j++) f(w[l * n + j], i, l, map.global_index(p, j));
  }
}

void fill_tagged(const model::ShardMap& map, Arena& a, int state) {
  for_each_element(map, a, [&](float& v, int p, int l, int64_t g) { v = tag(state, p, l, g); });
}

int64_t count_untagged(const model::ShardMap& map, Arena& a, int state) {
  int64_t bad = 0;
  for_each_element(map, a, [&](float& v, int p, int l, int64_t g) { bad += v != tag(state, p, l, g); });
  return bad;
}

// Saves a tagged state (params 0, m 1, v 2) on `shape` over the world; returns the step directory.
std::string save_tagged(const std::string& root, const model::GptConfig& cfg, const parallel::GridShape& shape,
                        int64_t step, bool with_adam = true) {
  parallel::Grid grid(shape, comm::world());
  model::ShardMap map(cfg, shape, grid.coords());
  Arena p = shard_arena(map, "params"), m = shard_arena(map, "m"), v = shard_arena(map, "v");
  fill_tagged(map, p, 0);
  fill_tagged(map, m, 1);
  fill_tagged(map, v, 2);
  ck::Manifest man;
  man.model = cfg;
  man.step = step;
  return ck::save_sharded(root, man, grid, p, with_adam ? &m : nullptr, with_adam ? &v : nullptr).dir;
}

// --- 1. the mapping ----------------------------------------------------------------------------------

TEST(ShardMap, AgreesWithGptOnEveryGrid) {
  auto world = comm::world();
  int grids = 0;
  for (const model::GptConfig& cfg : kOddConfigs)
  for (const parallel::GridShape& s : grids_of(world->size(), cfg)) {
    SCOPED_TRACE("grid " + s.str());
    parallel::Grid grid(s, world);
    model::Gpt gpt(cfg, grid, 1, 4, kernels::Backend::kCpu);
    model::ShardMap map(cfg, s, grid.coords());
    EXPECT_EQ(map.vocab_begin(), gpt.vocab_begin());
    EXPECT_EQ(map.vocab_rows(), gpt.vocab_rows());
    for (int i = 0; i < static_cast<int>(map.size()); i++) {
      const auto p = static_cast<Param>(i);
      ASSERT_EQ(map.shard_shape(p), gpt.param(p).shape()) << map.spec().params[static_cast<size_t>(p)].name;
      ASSERT_EQ(map.full_layer_numel(p), gpt.full_layer_numel(p));
      int64_t bad = 0;
      for (int64_t j = 0; j < map.shard_layer_numel(p); j++) bad += map.global_index(p, j) != gpt.global_index(p, j);
      EXPECT_EQ(bad, 0) << map.spec().params[static_cast<size_t>(p)].name;
    }
    grids++;
  }
  EXPECT_GT(grids, 0);
}

// Replicas hold what the canonical rank holds, the canonical ranks together hold each element once, and
// run_length finds runs of consecutive indices.
TEST(ShardMap, ReplicasAndRunsAreRight) {
  for (const model::GptConfig& cfg : kOddConfigs)
  for (const parallel::GridShape& s : grids_of(8, cfg)) {
    for (int i = 0; i < static_cast<int>(model::model_spec(cfg).params.size()); i++) {
      const auto p = static_cast<Param>(i);
      std::vector<int> seen(static_cast<size_t>(model::ShardMap(cfg, s, {}).full_layer_numel(p)), 0);
      for (int z = 0; z < s.gz; z++)
        for (int y = 0; y < s.gy; y++)
          for (int x = 0; x < s.gx; x++) {
            model::ShardMap map(cfg, s, {x, y, z, 0});
            const parallel::GridCoords c0{(map.spec().replica_axes(p) & model::kReplicatedOverX) ? 0 : x,
                                          (map.spec().replica_axes(p) & model::kReplicatedOverY) ? 0 : y,
                                          (map.spec().replica_axes(p) & model::kReplicatedOverZ) ? 0 : z, 0};
            model::ShardMap canon(cfg, s, c0);
            const int64_t n = map.shard_layer_numel(p);
            for (int64_t j = 0; j < n; j++) {
              ASSERT_EQ(map.global_index(p, j), canon.global_index(p, j)) << s.str() << " " << map.spec().params[static_cast<size_t>(p)].name;
              if (!map.is_replica(p)) seen[static_cast<size_t>(map.global_index(p, j))]++;
              // runs: consecutive indices (not necessarily maximal)
              const int64_t len = map.run_length(p, j);
              ASSERT_TRUE(len >= 1 && j + len <= n);
              ASSERT_EQ(map.global_index(p, j + len - 1), map.global_index(p, j) + len - 1)
                  << s.str() << " " << map.spec().params[static_cast<size_t>(p)].name << " j " << j;
            }
          }
      for (int n : seen) ASSERT_EQ(n, 1) << s.str() << " " << model::model_spec(cfg).params[static_cast<size_t>(p)].name;
    }
  }
}

// --- 2. resharding -----------------------------------------------------------------------------------

void expect_loads_on_every_grid_exactly(const model::GptConfig& cfg);

TEST(ShardedCheckpoint, LoadsOnEveryGridExactly) {
  for (const model::GptConfig& cfg : kOddConfigs) expect_loads_on_every_grid_exactly(cfg);
}

void expect_loads_on_every_grid_exactly(const model::GptConfig& cfg) {
  auto world = comm::world();
  SharedTmpDir tmp;
  std::vector<parallel::GridShape> grids = grids_of(world->size(), cfg);
  int step = 0, loads = 0;
  for (const parallel::GridShape& from : grids) {
    if (from.gdata != 1 && world->size() > 1) continue;  // data replicas write nothing of their own
    const std::string dir = save_tagged(tmp / "ck", cfg, from, ++step);
    std::vector<parallel::GridShape> targets = grids;
    targets.push_back({1, 1, 1, 1});  // one rank, on its own
    for (const parallel::GridShape& to : targets) {
      SCOPED_TRACE("from " + from.str() + " to " + to.str());
      auto comm = to.size() == world->size() ? world : self_comm();
      parallel::Grid grid(to, comm);
      model::ShardMap map(cfg, to, grid.coords());
      Arena p = shard_arena(map, "params"), m = shard_arena(map, "m"), v = shard_arena(map, "v");
      ck::LoadResult r = ck::load_sharded(dir, grid, cfg, p, &m, &v);
      EXPECT_EQ(r.resharded, !(from.gx == to.gx && from.gy == to.gy && from.gz == to.gz));
      EXPECT_EQ(r.manifest.grid.str(), from.str());
      EXPECT_EQ(count_untagged(map, p, 0), 0);
      EXPECT_EQ(count_untagged(map, m, 1), 0);
      EXPECT_EQ(count_untagged(map, v, 2), 0);
      loads++;
    }
  }
  EXPECT_GT(loads, 0);
  // axonn convert's path: the full tensors, on one rank, without MPI
  if (world->rank() == 0) {
    Arena full("full");
    ck::Manifest m = ck::load_consolidated_params(tmp / "ck", full);
    model::ShardMap one(cfg, {1, 1, 1, 1}, {});
    EXPECT_EQ(m.step, step);
    EXPECT_EQ(count_untagged(one, full, 0), 0);
  }
}

// --- 3. refusals -------------------------------------------------------------------------------------

parallel::GridShape world_grid(int n) {
  if (n == 4) return {2, 1, 2, 1};
  return {n, 1, 1, 1};
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x40;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(ShardedCheckpoint, RefusesBadCheckpointsOnEveryRankBeforeChangingState) {
  auto world = comm::world();
  SharedTmpDir tmp;
  const model::GptConfig cfg = odd_config();
  const parallel::GridShape shape = world_grid(world->size());
  const std::string good = save_tagged(tmp / "good", cfg, shape, 3);
  const std::string weights_only = save_tagged(tmp / "weights", cfg, shape, 3, false);
  // the last coordinate's file: on the same grid only its rank reads it, the others learn of it
  const std::string last = ck::tp_file_name(shape.gx - 1, shape.gy - 1, shape.gz - 1);
  parallel::Grid grid(shape, world);
  model::ShardMap map(cfg, shape, grid.coords());
  Arena p = shard_arena(map, "params"), m = shard_arena(map, "m"), v = shard_arena(map, "v");

  int n = 0;
  // Copies the good checkpoint, lets `mutate` damage it, and expects every rank to refuse it with a
  // message holding `want`, leaving the arenas alone.
  auto expect_refused = [&](const std::string& what, const std::function<std::string(const std::string&)>& mutate,
                            std::vector<std::string> want, const model::GptConfig& expected, bool adam = true,
                            const std::string& from = "") {
    SCOPED_TRACE(what);
    const std::string dir = tmp / ("case" + std::to_string(++n)) + "/" + ck::step_dir_name(3);
    std::string path = dir;
    on_rank0([&] {
      fs::create_directories(fs::path(dir).parent_path());
      fs::copy(from.empty() ? good : from, dir, fs::copy_options::recursive);
    });
    if (world->rank() == 0) path = mutate(dir);
    std::vector<int32_t> buf(512, 0);  // the path mutate chose, to every rank
    std::memcpy(buf.data(), path.data(), std::min<size_t>(path.size(), 2000));
    world->broadcast(buf.data(), buf.size(), DType::kI32, 0);
    path = reinterpret_cast<const char*>(buf.data());
    for (Arena* a : {&p, &m, &v})
      for (size_t i = 0; i < a->size(); i++) {
        Tensor t = a->tensor(i);
        std::fill(t.f32(), t.f32() + t.numel(), -7.0f);
      }
    std::string msg;
    try {
      ck::load_sharded(path, grid, expected, p, adam ? &m : nullptr, adam ? &v : nullptr);
      ADD_FAILURE() << "loaded";
    } catch (const IoError& e) {
      msg = e.what();
    }
    for (const std::string& w : want) EXPECT_NE(msg.find(w), std::string::npos) << "message: " << msg;
    int64_t changed = 0;
    for (Arena* a : {&p, &m, &v})
      for (size_t i = 0; i < a->size(); i++) {
        Tensor t = a->tensor(i);
        for (int64_t j = 0; j < t.numel(); j++) changed += t.f32()[j] != -7.0f;
      }
    EXPECT_EQ(changed, 0) << "state changed before the refusal";
  };

  auto file_of = [&](const std::string& dir) { return dir + "/" + last; };
  expect_refused("corrupt", [&](const std::string& d) {
    flip_byte(file_of(d), fs::file_size(file_of(d)) / 2);
    return d;
  }, {last, "fails its checksum"}, cfg);
  expect_refused("truncated", [&](const std::string& d) {
    fs::resize_file(file_of(d), fs::file_size(file_of(d)) - 100);
    return d;
  }, {last, "is truncated"}, cfg);
  expect_refused("file missing", [&](const std::string& d) {
    fs::remove(file_of(d));
    return d;
  }, {last, "is missing"}, cfg);
  expect_refused("manifest missing (save never committed)", [&](const std::string& d) {
    fs::remove(d + "/manifest.json");
    return d;
  }, {"has no manifest.json"}, cfg);
  expect_refused("manifest lacks a file", [&](const std::string& d) {
    ck::Manifest man = ck::read_manifest(d);
    man.files.pop_back();
    ck::write_file_atomic(d + "/manifest.json", ck::manifest_to_json(man));
    return d;
  }, {"is incomplete", last}, cfg);
  expect_refused("manifest truncated", [&](const std::string& d) {
    fs::resize_file(d + "/manifest.json", 40);
    return d;
  }, {"manifest.json", "not valid JSON"}, cfg);
  expect_refused("unfinished save", [&](const std::string& d) {
    fs::rename(d, d + ".tmp");
    return d + ".tmp";
  }, {"unfinished save"}, cfg);
  model::GptConfig other = cfg;
  other.vocab_size = 69;  // same layout, another model
  expect_refused("another model", [&](const std::string& d) { return d; }, {"is for the model", "V=70"}, other);
  expect_refused("grid that does not fit the model", [&](const std::string& d) {
    ck::Manifest man = ck::read_manifest(d);
    man.grid.gx = 3;
    ck::write_file_atomic(d + "/manifest.json", ck::manifest_to_json(man));
    return d;
  }, {"grid 3x", "does not fit"}, cfg);
  expect_refused("weights only, resumed", [&](const std::string& d) { return d; },
                 {"no optimizer state", "--init"}, cfg, true, weights_only);
  // a weights-only checkpoint is fine for weights
  ck::load_sharded(weights_only, grid, cfg, p);
  EXPECT_EQ(count_untagged(map, p, 0), 0);

  // resharding, the ranks share out the checksums: a corrupt file is still refused by every rank
  if (world->size() > 1) {
    const parallel::GridShape other_shape{1, 1, world->size(), 1};
    const std::string dir = tmp / "reshard-corrupt";
    on_rank0([&] {
      fs::copy(good, dir, fs::copy_options::recursive);
      flip_byte(dir + "/" + last, 12345);
    });
    parallel::Grid ogrid(other_shape, world);
    model::ShardMap omap(cfg, other_shape, ogrid.coords());
    Arena op = shard_arena(omap, "params"), om = shard_arena(omap, "m"), ov = shard_arena(omap, "v");
    std::string msg;
    try {
      ck::load_sharded(dir, ogrid, cfg, op, &om, &ov);
    } catch (const IoError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(last + "' fails its checksum"), std::string::npos) << "message: " << msg;
    int64_t changed = 0;  // the arenas were allocated zero
    for (Arena* a : {&op, &om, &ov})
      for (size_t i = 0; i < a->size(); i++) {
        Tensor t = a->tensor(i);
        for (int64_t j = 0; j < t.numel(); j++) changed += t.f32()[j] != 0.0f;
      }
    EXPECT_EQ(changed, 0) << "state changed before the refusal";
  }
}

// --- 4. training: exact resume and resharding ---------------------------------------------------------

// The reference GPT-2, or the oracle's Llama of tests/golden (from its Hugging Face directory).
train::TrainConfig resume_config(bool llama = false) {
  train::TrainConfig c;
  c.init = llama ? test::golden_file("llama-gqa") : test::reference_file("gpt2-tiny/model.bin");
  c.data = llama ? test::golden_file("llama-gqa/tokens.bin") : test::reference_file("gpt2-tiny/tokens.bin");
  c.batch_size = 4;
  c.seq_len = 32;
  c.steps = 8;
  c.lr = 3e-3f;
  c.lr_schedule = "cosine";
  c.warmup_steps = 2;
  c.min_lr_frac = 0.1f;
  c.weight_decay = 0.1f;
  c.grad_clip = 0.5f;  // the gradient norms are above 1: clipping is on every step
  c.peak_gflops = 100;
  c.quiet = true;
  return c;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every tensor of every file of two step directories, byte for byte.
void expect_same_tensors(const std::string& a, const std::string& b) {
  ck::Manifest ma = ck::read_manifest(a), mb = ck::read_manifest(b);
  ASSERT_EQ(ma.files.size(), mb.files.size());
  EXPECT_EQ(ma.loader.position, mb.loader.position);
  EXPECT_EQ(ma.tokens_seen, mb.tokens_seen);
  EXPECT_EQ(ma.extra.at("adam_steps"), mb.extra.at("adam_steps"));
  for (const ck::FileEntry& f : ma.files) {
    ck::SafetensorsFile fa(a + "/" + f.name), fb(b + "/" + f.name);
    ASSERT_EQ(fa.tensors().size(), 3 * model::model_spec(ma.model).params.size());  // params, adam_m, adam_v
    for (const ck::TensorInfo& t : fa.tensors()) {
      const ck::TensorInfo& u = fb.get(t.name);
      ASSERT_EQ(t.bytes(), u.bytes());
      EXPECT_EQ(std::memcmp(fa.data(t), fb.data(u), t.bytes()), 0) << f.name << " " << t.name << " differs";
    }
  }
}

TEST(Resume, BitIdenticalToTheUninterruptedRun) {
  auto world = comm::world();
  const int n = world->size();
  std::vector<std::string> grids = n == 1 ? std::vector<std::string>{"1,1,1,1"}
                                   : n == 2 ? std::vector<std::string>{"1,1,2,1", "1,1,1,2"}
                                            : std::vector<std::string>{"2,1,2,1", "1,2,1,2"};
  for (bool llama : {false, true})
  for (const std::string& g : grids) {
    SCOPED_TRACE("grid " + g + (llama ? ", llama" : ", gpt2"));
    SharedTmpDir tmp;
    train::TrainConfig c = resume_config(llama);
    c.grid = g;
    c.checkpoint_dir = tmp / "straight";
    c.checkpoint_every = 4;
    std::vector<train::StepMetrics> straight = train::train(c, world);
    ASSERT_EQ(straight.size(), 8u);

    train::TrainConfig r = c;  // a new process would build everything afresh: so does train()
    r.resume_from = tmp / "straight/step-00000004";
    r.checkpoint_dir = tmp / "resumed";
    std::vector<train::StepMetrics> resumed = train::train(r, world);
    ASSERT_EQ(resumed.size(), 4u);
    for (size_t i = 0; i < resumed.size(); i++) {
      const train::StepMetrics& a = straight[i + 4];
      const train::StepMetrics& b = resumed[i];
      EXPECT_EQ(b.step, a.step);
      EXPECT_TRUE(same_bits(a.loss, b.loss)) << "step " << a.step << ": " << a.loss << " vs " << b.loss;
      EXPECT_TRUE(same_bits(a.lr, b.lr)) << "step " << a.step;
      EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << a.step;
      EXPECT_GT(a.grad_norm, c.grad_clip) << "clipping is not exercised";
    }
    if (world->rank() == 0) expect_same_tensors(tmp / "straight/step-00000008", tmp / "resumed/step-00000008");

    // --resume: the latest step of --checkpoint-dir (here step 4, as if the run died before step 8's
    // save: its directory and the pointer to it never were)
    on_rank0([&] {
      fs::copy(tmp / "straight", tmp / "auto", fs::copy_options::recursive);
      fs::remove_all(tmp / "auto/step-00000008");
      checkpoint::write_file_atomic(tmp / "auto/latest", "step-00000004\n");
    });
    train::TrainConfig a = c;
    a.checkpoint_dir = tmp / "auto";
    a.resume = true;
    std::vector<train::StepMetrics> again = train::train(a, world);
    ASSERT_EQ(again.size(), 4u);
    for (size_t i = 0; i < again.size(); i++)
      EXPECT_TRUE(same_bits(again[i].loss, straight[i + 4].loss)) << "step " << again[i].step;
    // nothing left to do: resuming a finished run runs no step
    EXPECT_TRUE(train::train(a, world).empty());
  }
}

std::vector<float> losses_of(const std::vector<train::StepMetrics>& h) {
  std::vector<float> v;
  for (const auto& m : h) v.push_back(m.loss);
  return v;
}

TEST(Resume, ReshardedAcrossGridsKeepsTheLosses) {
  auto world = comm::world();
  if (world->size() != 4) GTEST_SKIP() << "the chain 2,1,2,1 -> 1,2,1,2 -> 1 rank runs on 4 ranks";
  for (bool llama : {false, true}) {
  SCOPED_TRACE(llama ? "llama" : "gpt2");
  SharedTmpDir tmp;
  train::TrainConfig c = resume_config(llama);
  c.steps = 12;
  train::TrainConfig one = c;
  one.grid = "1,1,1,1";
  const std::vector<float> ref = losses_of(train::train(one, self_comm()));  // uninterrupted, one rank

  train::TrainConfig a = c;  // steps 0-3 on 2,1,2,1
  a.grid = "2,1,2,1";
  a.checkpoint_dir = tmp / "a";
  a.checkpoint_every = 4;
  std::vector<float> got = losses_of(train::train(a, world));
  got.resize(4);
  train::TrainConfig b = c;  // steps 4-7 on 1,2,1,2
  b.grid = "1,2,1,2";
  b.resume_from = tmp / "a/step-00000004";
  b.checkpoint_dir = tmp / "b";
  b.checkpoint_every = 4;
  std::vector<float> lb = losses_of(train::train(b, world));
  ASSERT_EQ(lb.size(), 8u);
  got.insert(got.end(), lb.begin(), lb.begin() + 4);
  train::TrainConfig d = c;  // steps 8-11 on one rank (each rank on its own)
  d.grid = "1,1,1,1";
  d.resume_from = tmp / "b/step-00000008";
  d.checkpoint_dir = tmp / ("d" + std::to_string(world->rank()));  // a branch writes its own checkpoints (one per rank: each runs alone)
  std::vector<float> ld = losses_of(train::train(d, self_comm()));
  got.insert(got.end(), ld.begin(), ld.end());
  ASSERT_EQ(got.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_NEAR(got[i], ref[i], 2e-4) << "step " << i;
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
  }
  if (world->rank() == 0)
    std::printf("%s 2,1,2,1 -> 1,2,1,2 -> 1 rank: max |loss - uninterrupted| = %.3g\n", llama ? "llama" : "gpt2",
                worst);
  }
}

}  // namespace
}  // namespace axonn
