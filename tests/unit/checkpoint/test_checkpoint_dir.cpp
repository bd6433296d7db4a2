// Checkpoint directories: names, manifest, commit and `latest`, keep-N, verification of corrupt,
// truncated, incomplete and mismatched checkpoints, and SIGKILL in the middle of saves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "llmc_files.hpp"

using namespace axonn;
namespace ck = axonn::checkpoint;
namespace fs = std::filesystem;

namespace {

model::GptConfig small() {
  model::GptConfig c;
  c.max_seq_len = 8;
  c.vocab_size = 30;
  c.padded_vocab_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 6;
  return c;
}

// Data that identifies its step: element i of a file saved at `step` is step * 1000 + i.
std::vector<float> pattern(int64_t step, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<float>(step * 1000 + static_cast<int64_t>(i % 100000));
  return v;
}

// Saves step `step` as `nfiles` "ranks", each writing its own tp file of n floats.
std::string save_step(const std::string& root, int64_t step, int keep = 0, size_t n = 64, int nfiles = 2) {
  std::string tmp = ck::begin_checkpoint(root, step);
  ck::Manifest m;
  m.model = small();
  m.grid = {nfiles, 1, 1, 1};
  m.step = step;
  m.tokens_seen = step * 128;
  std::vector<float> data = pattern(step, n);
  for (int x = 0; x < nfiles; x++) {
    ck::SafetensorsWriter w;
    w.add("params.data", DType::kF32, {static_cast<int64_t>(n)}, data.data());
    m.files.push_back(ck::write_checkpoint_file(tmp, ck::tp_file_name(x, 0, 0), w));
  }
  return ck::commit_checkpoint(root, m, keep);
}

// The step whose data a committed directory holds, after full verification.
int64_t verified_step(const std::string& dir, size_t n = 64) {
  ck::Manifest m = ck::verify_checkpoint(dir);
  for (const ck::FileEntry& e : m.files) {
    ck::SafetensorsFile f((fs::path(dir) / e.name).string());
    std::vector<float> got(n);
    f.read("params.data", Tensor(got.data(), {static_cast<int64_t>(n)}));
    EXPECT_EQ(got, pattern(m.step, n)) << dir << "/" << e.name;
  }
  return m.step;
}

template <typename F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "<no IoError>";
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void flip_byte(const std::string& p, uint64_t at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

}  // namespace

TEST(CheckpointDir, Names) {
  EXPECT_EQ(ck::step_dir_name(5), "step-00000005");
  EXPECT_EQ(ck::step_dir_name(123456789), "step-123456789");
  EXPECT_EQ(ck::parse_step_dir_name("step-00000005"), 5);
  EXPECT_EQ(ck::parse_step_dir_name("step-123456789"), 123456789);
  EXPECT_FALSE(ck::parse_step_dir_name("step-00000005.tmp"));
  EXPECT_FALSE(ck::parse_step_dir_name("step-"));
  EXPECT_FALSE(ck::parse_step_dir_name("step-12a"));
  EXPECT_FALSE(ck::parse_step_dir_name("latest"));
  EXPECT_EQ(ck::tp_file_name(1, 2, 3), "tp-x1-y2-z3.safetensors");
  EXPECT_EQ(ck::staging_dir("r", 7), "r/step-00000007.tmp");
  EXPECT_THROW(ck::step_dir_name(-1), InvalidArgument);
}

TEST(CheckpointDir, ManifestRoundTripsEveryField) {
  ck::Manifest m;
  m.model = small();
  m.grid = {2, 1, 2, 3};
  m.step = 1234;
  m.tokens_seen = 9876543210LL;
  m.loader = {3, 4567};
  m.rng = {UINT64_MAX, 17, "5489 1 2 3"};
  m.extra = {{"data", "train.bin"}, {"lr_schedule", "cosine"}};
  m.files = {{"tp-x0-y0-z0.safetensors", 100, 0x0123456789abcdefULL}, {"tp-x1-y0-z0.safetensors", 7, 0}};
  std::string text = ck::manifest_to_json(m);
  ck::Manifest r = ck::manifest_from_json(text, "test");
  EXPECT_EQ(r.format_version, ck::kManifestVersion);
  EXPECT_EQ(r.library_version, ck::library_version());
  EXPECT_EQ(r.model.str(), m.model.str());
  EXPECT_EQ(r.model.num_heads, 2);
  EXPECT_EQ(r.grid, m.grid);
  EXPECT_EQ(r.step, 1234);
  EXPECT_EQ(r.tokens_seen, 9876543210LL);
  EXPECT_EQ(r.loader.shard, 3);
  EXPECT_EQ(r.loader.position, 4567);
  EXPECT_EQ(r.rng.seed, UINT64_MAX);
  EXPECT_EQ(r.rng.counter, 17u);
  EXPECT_EQ(r.rng.engine, "5489 1 2 3");
  EXPECT_EQ(r.extra, m.extra);
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].name, "tp-x0-y0-z0.safetensors");
  EXPECT_EQ(r.files[0].bytes, 100u);
  EXPECT_EQ(r.files[0].xxh3, 0x0123456789abcdefULL);
  EXPECT_NE(text.find("\"xxh3_64\": \"0123456789abcdef\""), std::string::npos) << text;
  EXPECT_EQ(ck::manifest_to_json(r), text);
}

TEST(CheckpointDir, ManifestRejectsBadFields) {
  ck::Manifest m;
  m.model = small();
  m.files = {{"a.safetensors", 1, 2}};
  const std::string good = ck::manifest_to_json(m);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  auto err = [&](const std::string& text) { return io_error_of([&] { ck::manifest_from_json(text, "M"); }); };
  EXPECT_NE(err(good.substr(0, good.size() / 2)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(with("\"step\"", "\"stop\"")).find("missing field 'step'"), std::string::npos);
  EXPECT_NE(err(with("\"num_layers\": 2", "\"num_layers\": \"2\"")).find("'num_layers' is not an integer"),
            std::string::npos);
  EXPECT_NE(err(with("\"num_heads\": 2", "\"num_heads\": 4")).find("bad model config"), std::string::npos);
  EXPECT_NE(err(with("\"format_version\": 2", "\"format_version\": 3")).find("newer axonn"), std::string::npos);
  // a valid value edited by hand: the manifest's own checksum refuses it
  EXPECT_NE(err(with("\"step\": 0", "\"step\": 7")).find("fails its own checksum"), std::string::npos);
  EXPECT_NE(err(with("\"bytes\": 1", "\"bytes\": 9")).find("own checksum"), std::string::npos);
  EXPECT_NE(err(with("\"axonn-checkpoint\"", "\"other\"")).find("has format 'other'"), std::string::npos);
  EXPECT_NE(err(with("0000000000000002", "xyz")).find("malformed hash"), std::string::npos);
  EXPECT_NE(err(with("\"a.safetensors\"", "\"../a.safetensors\"")).find("outside its directory"), std::string::npos);
  EXPECT_NE(err(with("\"gx\": 1", "\"gx\": 0")).find("'gx' is 0, must be >= 1"), std::string::npos);
  EXPECT_NE(err("[]").find("not a JSON object"), std::string::npos);
}

TEST(CheckpointDir, CommitsAndPointsLatestAtTheNewest) {
  test::TempDir d;
  const std::string root = d.file("run");
  EXPECT_FALSE(ck::find_latest(root).has_value());
  EXPECT_TRUE(ck::list_checkpoints(root).empty());
  for (int64_t s : {10, 20, 30}) EXPECT_EQ(save_step(root, s), ck::step_dir(root, s));
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(read_all(root + "/latest"), "step-00000030\n");
  ASSERT_TRUE(ck::find_latest(root).has_value());
  EXPECT_EQ(*ck::find_latest(root), ck::step_dir(root, 30));
  EXPECT_EQ(verified_step(*ck::find_latest(root)), 30);
  EXPECT_EQ(verified_step(ck::step_dir(root, 10)), 10);
  // the user may name the root or a step
  EXPECT_EQ(ck::resolve_checkpoint(root), ck::step_dir(root, 30));
  EXPECT_EQ(ck::resolve_checkpoint(ck::step_dir(root, 20)), ck::step_dir(root, 20));
  // nothing but steps and the pointer
  for (const auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "latest" || ck::parse_step_dir_name(n).has_value()) << n;
  }
  ck::Manifest m = ck::read_manifest(ck::step_dir(root, 20));
  EXPECT_EQ(m.tokens_seen, 20 * 128);
  EXPECT_EQ(m.files.size(), 2u);
  // a rank verifies only the files it reads
  EXPECT_NO_THROW(ck::verify_checkpoint(ck::step_dir(root, 20), {ck::tp_file_name(1, 0, 0)}));
  EXPECT_NE(io_error_of([&] {
              ck::verify_checkpoint(ck::step_dir(root, 20), {"tp-x9-y0-z0.safetensors"});
            }).find("not listed in the manifest"),
            std::string::npos);
}

TEST(CheckpointDir, KeepsTheNewestN) {
  test::TempDir d;
  const std::string root = d.file("run");
  for (int64_t s = 1; s <= 5; s++) save_step(root, s, /*keep=*/2);
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{4, 5}));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(root)) entries += e.path().filename() != "latest";
  EXPECT_EQ(entries, 2u) << "pruned steps must leave nothing behind";
  // keep 1
  save_step(root, 6, 1);
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{6}));
  // the step `latest` names survives pruning even if older (a run resumed from it)
  save_step(root, 7, 0);
  save_step(root, 8, 0);
  ck::write_file_atomic(root + "/latest", "step-00000006\n");
  ck::prune_checkpoints(root, 1);
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{6, 8}));
  EXPECT_THROW(ck::commit_checkpoint(root, ck::Manifest{}, -1), InvalidArgument);
}

TEST(CheckpointDir, DetectsCorruptTruncatedMissingAndMismatched) {
  test::TempDir d;
  const std::string root = d.file("run");
  const std::string dir = save_step(root, 3, 0, 1000);
  const std::string file = dir + "/" + ck::tp_file_name(1, 0, 0);
  const std::string saved = read_all(file);

  // one flipped bit in the data: same size, different hash
  flip_byte(file, saved.size() - 10);
  std::string e = io_error_of([&] { ck::verify_checkpoint(dir); });
  EXPECT_NE(e.find("file 'tp-x1-y0-z0.safetensors' fails its checksum"), std::string::npos) << e;
  EXPECT_NE(e.find(dir), std::string::npos) << e;
  auto status = ck::check_checkpoint_files(dir, ck::read_manifest(dir));
  ASSERT_EQ(status.size(), 2u);
  EXPECT_TRUE(status[0].ok());
  EXPECT_FALSE(status[1].ok());

  // truncated
  fs::resize_file(file, saved.size() - 100);
  e = io_error_of([&] { ck::verify_checkpoint(dir); });
  EXPECT_NE(e.find("tp-x1-y0-z0.safetensors' is " + std::to_string(saved.size() - 100) + " bytes"), std::string::npos)
      << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  // missing
  fs::remove(file);
  e = io_error_of([&] { ck::verify_checkpoint(dir); });
  EXPECT_NE(e.find("tp-x1-y0-z0.safetensors' is missing"), std::string::npos) << e;

  // a corrupt manifest, then none at all
  std::string manifest = dir + "/manifest.json";
  std::string text = read_all(manifest);
  ck::write_file_atomic(manifest, text.substr(0, text.size() / 2));
  e = io_error_of([&] { ck::verify_checkpoint(dir); });
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find(manifest), std::string::npos) << e;
  // a manifest copied from another step
  ck::write_file_atomic(manifest, text);
  fs::rename(dir, ck::step_dir(root, 4));
  e = io_error_of([&] { ck::read_manifest(ck::step_dir(root, 4)); });
  EXPECT_NE(e.find("says step 3 but its directory is step-00000004"), std::string::npos) << e;
  e = io_error_of([&] { ck::read_manifest(ck::step_dir(root, 4) + "/"); });
  EXPECT_NE(e.find("says step 3 but its directory is step-00000004"), std::string::npos) << e;
  fs::rename(ck::step_dir(root, 4), dir);
  fs::remove(manifest);
  e = io_error_of([&] { ck::verify_checkpoint(dir); });
  EXPECT_NE(e.find("has no manifest.json"), std::string::npos) << e;
  e = io_error_of([&] { ck::resolve_checkpoint(dir); });
  EXPECT_NE(e.find("has no manifest.json: the save did not complete"), std::string::npos) << e;

  // another model's checkpoint
  const std::string other = save_step(root, 5);
  ck::Manifest m = ck::verify_checkpoint(other);
  EXPECT_NO_THROW(ck::check_model_config(m, small(), other));
  model::GptConfig bigger = small();
  bigger.num_layers = 3;
  e = io_error_of([&] { ck::check_model_config(m, bigger, other); });
  EXPECT_NE(e.find("is for the model L=2"), std::string::npos) << e;
  EXPECT_NE(e.find("not L=3"), std::string::npos) << e;
}

TEST(CheckpointDir, IgnoresUnfinishedSaves) {
  test::TempDir d;
  const std::string root = d.file("run");
  save_step(root, 1);
  // a save of step 2 that never committed (its writer died)
  std::string tmp = ck::begin_checkpoint(root, 2);
  float x = 1;
  ck::SafetensorsWriter w;
  w.add("params.data", DType::kF32, {1}, &x);
  ck::write_checkpoint_file(tmp, ck::tp_file_name(0, 0, 0), w);
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{1}));
  EXPECT_EQ(*ck::find_latest(root), ck::step_dir(root, 1));
  std::string e = io_error_of([&] { ck::resolve_checkpoint(tmp); });
  EXPECT_NE(e.find("unfinished save"), std::string::npos) << e;
  // the pointer deleted: the newest committed step is found
  fs::remove(root + "/latest");
  EXPECT_EQ(*ck::find_latest(root), ck::step_dir(root, 1));
  // a pointer naming a step that is gone, or no step at all: refused, never an older step instead
  ck::write_file_atomic(root + "/latest", "step-00000099\n");
  e = io_error_of([&] { ck::find_latest(root); });
  EXPECT_NE(e.find("names step-00000099, which is missing"), std::string::npos) << e;
  ck::write_file_atomic(root + "/latest", "nonsense\n");
  e = io_error_of([&] { ck::find_latest(root); });
  EXPECT_NE(e.find("does not name a step"), std::string::npos) << e;
  ck::write_file_atomic(root + "/latest", "step-00000001\n");
  // the next committed save clears the leftover
  save_step(root, 3);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{1, 3}));
  // nothing to resolve
  fs::create_directories(d.file("empty"));
  e = io_error_of([&] { ck::resolve_checkpoint(d.file("empty")); });
  EXPECT_NE(e.find("holds no committed checkpoint"), std::string::npos) << e;
  // a folder above a root (a run directory above its checkpoints/) names the root
  fs::create_directories(d.file("r1"));
  fs::rename(root, d.file("r1/checkpoints"));
  e = io_error_of([&] { ck::resolve_checkpoint(d.file("r1")); });
  EXPECT_NE(e.find("holds no committed checkpoint (no step-NNNNNNNN directory with a manifest.json); '" +
                   d.file("r1/checkpoints") + "' does: give that"),
            std::string::npos)
      << e;
  e = io_error_of([&] { ck::resolve_checkpoint(d.file("nope")); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

TEST(CheckpointDir, CommitRefusesAMissingOrShortFileAndKeepsThePrevious) {
  test::TempDir d;
  const std::string root = d.file("run");
  save_step(root, 1);
  std::string tmp = ck::begin_checkpoint(root, 2);
  float x[4] = {};
  ck::SafetensorsWriter w;
  w.add("params.data", DType::kF32, {4}, x);
  ck::Manifest m;
  m.model = small();
  m.step = 2;
  m.files.push_back(ck::write_checkpoint_file(tmp, ck::tp_file_name(0, 0, 0), w));
  m.files.push_back({ck::tp_file_name(1, 0, 0), 100, 0});  // a rank that never wrote
  std::string e = io_error_of([&] { ck::commit_checkpoint(root, m); });
  EXPECT_NE(e.find("tp-x1-y0-z0.safetensors' is missing"), std::string::npos) << e;
  m.files[1] = m.files[0];
  m.files[1].name = ck::tp_file_name(1, 0, 0);
  fs::copy_file(tmp + "/" + m.files[0].name, tmp + "/" + m.files[1].name);
  fs::resize_file(tmp + "/" + m.files[1].name, 10);
  e = io_error_of([&] { ck::commit_checkpoint(root, m); });
  EXPECT_NE(e.find("is 10 bytes, but its writer reported"), std::string::npos) << e;
  EXPECT_EQ(*ck::find_latest(root), ck::step_dir(root, 1));
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{1}));
  // commit without begin
  m.step = 7;
  e = io_error_of([&] { ck::commit_checkpoint(root, m); });
  EXPECT_NE(e.find("begin_checkpoint was not called"), std::string::npos) << e;
}

TEST(CheckpointDir, SavingTheSameStepAgainReplacesIt) {
  test::TempDir d;
  const std::string root = d.file("run");
  save_step(root, 1);
  save_step(root, 2, 0, 64, 2);
  save_step(root, 2, 0, 64, 3);  // e.g. resumed from step 1 on another grid and saved step 2 again
  EXPECT_EQ(ck::list_checkpoints(root), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ck::read_manifest(ck::step_dir(root, 2)).files.size(), 3u);
  EXPECT_EQ(verified_step(*ck::find_latest(root)), 2);
  for (const auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "latest" || ck::parse_step_dir_name(n).has_value()) << n;
  }
}

TEST(CheckpointDir, ArenasRoundTripThroughACheckpointFile) {
  test::TempDir d;
  model::GptConfig c = small();
  Arena a("params"), b("params");
  model::reserve_params(a, model::model_spec(c));
  model::reserve_params(b, model::model_spec(c));
  a.allocate();
  b.allocate();
  model::init_params(a, model::model_spec(c), 11);
  ck::SafetensorsWriter w;
  ck::add_arena(w, "params", a);
  w.write(d.file("p.safetensors"));
  ck::SafetensorsFile f(d.file("p.safetensors"));
  EXPECT_NE(f.find("params.qkvw"), nullptr);
  ck::read_arena(f, "params", b);
  for (size_t i = 0; i < a.size(); i++)
    EXPECT_EQ(std::memcmp(a.tensor(i).data(), b.tensor(i).data(), a.tensor(i).bytes()), 0) << a.slot_name(i);
  // another model's arena does not fit
  model::GptConfig other = c;
  other.channels = 8;
  Arena o("params");
  model::reserve_params(o, model::model_spec(other));
  o.allocate();
  std::string e = io_error_of([&] { ck::read_arena(f, "params", o); });
  EXPECT_NE(e.find("tensor 'params.wte' has shape [32, 6], expected [32, 8]"), std::string::npos) << e;
}

// kill -9 at random moments of a stream of saves: whatever the moment, the checkpoint `find_latest`
// returns verifies and holds the data of its step, and saving resumes after it.
TEST(CheckpointDir, SigkillDuringSavesLeavesTheLastCheckpointLoadable) {
  test::TempDir d;
  const std::string root = d.file("run");
  constexpr size_t kN = 1 << 20;  // 4 MiB per file, 2 files per step: a save takes milliseconds
  save_step(root, 0, 2, kN);
  std::mt19937 rng(7);
  int kills_mid_save = 0;
  for (int round = 0; round < 12; round++) {
    auto latest = ck::find_latest(root);
    ASSERT_TRUE(latest.has_value()) << "round " << round;
    const int64_t before = verified_step(*latest, kN);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // the child saves step after step until killed
      try {
        for (int64_t s = before + 1;; s++) save_step(root, s, 2, kN);
      } catch (...) {
        _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 60000)(rng)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saving child exited on its own (status " << status << ")";
    // what the crash left: at most a .tmp, .old or .deleting directory beside the committed steps
    for (const auto& e : fs::directory_iterator(root))
      if (e.path().extension() == ".tmp") kills_mid_save++;
    latest = ck::find_latest(root);
    ASSERT_TRUE(latest.has_value()) << "round " << round;
    const int64_t after = verified_step(*latest, kN);
    EXPECT_GE(after, before);
    // every committed step verifies, not only the latest
    for (int64_t s : ck::list_checkpoints(root)) EXPECT_EQ(verified_step(ck::step_dir(root, s), kN), s);
  }
  // not a guarantee, but with these timings most kills land inside a save
  RecordProperty("kills_mid_save", kills_mid_save);
  // a normal save after all the crashes cleans up
  const int64_t last = *ck::parse_step_dir_name(fs::path(*ck::find_latest(root)).filename().string());
  save_step(root, last + 1, 2, kN);
  for (const auto& e : fs::directory_iterator(root)) {
    std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "latest" || ck::parse_step_dir_name(n).has_value()) << n;
  }
}
