// GPT-2 is unchanged by the model layer's redesign (issue 14): llm.c's reference run on one rank, and
// grids of 4 ranks with overlap, micro-batches, recompute, weight decay and clipping, give losses and
// gradient norms BIT-identical to those recorded (tests/golden/gpt2-bitwise/trajectories.txt).
//
// The fixture has sections, each headed "# machine: FINGERPRINT".
//   - "any": the `--kernels ref` cases. The ref kernels are compiled with -ffp-contract=off (and no
//     -ffast-math), so their bits do not depend on the ISA the build targets: -march=native on an AVX2, an
//     AVX-512 or a baseline x86-64 build give the same trajectories. They were 594ee27's (the last commit
//     before the redesign) until ref was compiled that way; they were recorded again then, on purpose.
//   - one section per machine for the `--kernels cpu` cases, whose bits depend on the GEMM library's
//     kernels and on the vector code -march=native gives (fingerprint: the sgemm backend, the bf16 GEMM
//     kernel oneDNN picks, and the processor's vendor, family and model). A cpu case is compared where a
//     section has this machine's fingerprint and the case; elsewhere it is skipped with a message. The
//     processor joined the fingerprint when an AMD Zen 5 (family 26) with the same oneDNN kernels as the
//     machine that had recorded the AVX-512 section gave the same gradient norms and two losses of thirty one
//     ulp apart; the sections recorded before then (an AVX2 machine's, 594ee27's fp32 cases; an AVX-512
//     machine's) could not name their processors and were dropped. The Zen 5's was recorded at the commit
//     that changed the fingerprint, which also compiled the cpu cross-entropy in the source's order
//     (src/kernels/CMakeLists.txt: with reassociation allowed, GCC had ordered a row's loss differently in
//     its fp32 and bf16 instances on that machine), changing every cpu case's bits on purpose. An AMD Zen 4
//     (family 25, model 17) recorded its own section at the next commit that had one: the same bits as the
//     Zen 5's, every case.
//
// To record again (only on purpose, on the commit the fixture should describe):
//   export AXONN_BITWISE_RECORD=/tmp/trajectories.txt   (from the repository root)
//   mpirun -np 4 -x AXONN_BITWISE_RECORD -x OMP_NUM_THREADS=1 build/bin/test_mpi_gpt2_bitwise
// It writes the "any" section and this machine's; keep the other machines' sections of the old file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/train/trainer.hpp"
#include "common/data_dirs.hpp"
#include "common/reference_run.hpp"

namespace axonn {
namespace {

struct Case {
  std::string name;
  train::TrainConfig config;
  bool one_rank;  // the reference run, alone on each rank; else the 4-rank world
};

// A 4-rank grid case: the reference model and data, B=8, 10 steps, clipping and weight decay (decay
// masks and the clip scale are in the trajectory), every overlap on, micro-batches and recompute.
train::TrainConfig grid_config(const std::string& grid, const std::string& kernels, const std::string& dtype) {
  train::TrainConfig c = test::reference_config();
  c.grid = grid;
  c.kernels = kernels;
  c.dtype = dtype;
  c.batch_size = 8;
  c.steps = 10;
  c.grad_clip = 1.0f;
  c.weight_decay = 0.1f;
  c.lr_schedule = "cosine";
  c.warmup_steps = 2;
  c.overlap = "all";
  c.micro_batch_size = 2;
  c.recompute = true;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* kernels : {"cpu", "ref"}) {
    train::TrainConfig c = test::reference_config();
    c.kernels = kernels;
    v.push_back({std::string("reference-") + kernels + "-fp32", c, true});
  }
  {
    train::TrainConfig c = test::reference_config();
    c.dtype = "bf16";
    v.push_back({"reference-cpu-bf16", c, true});
  }
  for (const char* grid : {"2,1,2,1", "1,2,1,2", "2,2,1,1"})
    v.push_back({std::string("grid-") + grid + "-cpu-fp32", grid_config(grid, "cpu", "fp32"), false});
  v.back().config.cache_gathered_weights = false;
  v[3].config.cache_gathered_weights = true;  // 2,1,2,1: Gz = 2
  v.push_back({"grid-1,2,2,1-cpu-bf16", grid_config("1,2,2,1", "cpu", "bf16"), false});
  v.push_back({"grid-2,1,2,1-ref-fp32", grid_config("2,1,2,1", "ref", "fp32"), false});
  v.push_back({"grid-1,2,1,2-ref-bf16", grid_config("1,2,1,2", "ref", "bf16"), false});
  return v;
}

// The processor's vendor, family and model (/proc/cpuinfo): what -march=native compiles the cpu kernels for
// (vector width, libmvec's variants, the order GCC gives -ffast-math arithmetic) and what the GEMM library
// tunes its blocking to. Two AVX-512 machines with the same oneDNN kernels, the one that recorded the old
// section and an AMD Zen 5, gave the same gradient norms and losses one ulp apart at two steps of thirty.
std::string processor() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, family, model;
  auto value = [&line] {
    const size_t colon = line.find(':');
    return colon == std::string::npos ? std::string() : line.substr(line.find_first_not_of(" \t", colon + 1));
  };
  while (std::getline(in, line) && (vendor.empty() || family.empty() || model.empty())) {
    if (line.rfind("vendor_id", 0) == 0) vendor = value();
    if (line.rfind("cpu family", 0) == 0) family = value();
    if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) model = value();
  }
  return vendor.empty() ? "unknown" : vendor + " " + family + "/" + model;
}

// What the cpu-kernel bits depend on besides the code: the GEMM library's choice of kernels, the processor.
std::string machine_fingerprint() {
  return std::string(kernels::gemm_backend_name(kernels::gemm_backend())) + " bf16:" + kernels::gemm_bf16_kernel() +
         " cpu:" + processor();
}

std::string hex(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}

// The fingerprint of the ref cases' section: their bits hold on any x86-64 machine.
constexpr const char* kAnyMachine = "any";

using Steps = std::vector<std::pair<std::string, std::string>>;  // per step: (loss, norm)

struct Recorded {
  std::map<std::string, std::map<std::string, Steps>> sections;  // fingerprint -> case -> steps
  const Steps* find(const std::string& fingerprint, const std::string& name) const {
    auto s = sections.find(fingerprint);
    if (s == sections.end()) return nullptr;
    auto c = s->second.find(name);
    return c == s->second.end() ? nullptr : &c->second;
  }
};

Recorded read_fixture(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  Recorded r;
  std::string line, section;
  while (std::getline(f, line)) {
    if (line.rfind("# machine: ", 0) == 0) section = line.substr(11);
    if (line.empty() || line[0] == '#') continue;
    EXPECT_FALSE(section.empty()) << path << ": a case before any '# machine:' line: " << line;
    std::istringstream is(line);
    std::string name, loss, norm;
    int step = 0;
    is >> name >> step >> loss >> norm;
    Steps& steps = r.sections[section][name];
    EXPECT_EQ(step, static_cast<int>(steps.size())) << path << ": " << line;
    steps.push_back({loss, norm});
  }
  return r;
}

TEST(Gpt2Bitwise, LossesAndNormsEqualTheRecordedCommit) {
  auto world = comm::world();
  ASSERT_EQ(world->size(), 4) << "the fixture's grids have 4 ranks";
  std::shared_ptr<comm::Communicator> self(world->split(world->rank(), 0, "self"));
  const char* record = std::getenv("AXONN_BITWISE_RECORD");
  const Recorded fixture = record ? Recorded{} : read_fixture(test::golden_file("gpt2-bitwise/trajectories.txt"));
  const std::string machine = machine_fingerprint();
  std::ostringstream any, mine;  // what record writes: the "any" section and this machine's
  any << "# machine: " << kAnyMachine << "\n";
  mine << "# machine: " << machine << "\n";
  int compared = 0, ref_compared = 0;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const bool cpu = k.config.kernels == "cpu";
    const Steps* want = record ? nullptr : fixture.find(cpu ? machine : kAnyMachine, k.name);
    if (!record && !want) {
      ASSERT_TRUE(cpu) << "the fixture's '" << kAnyMachine << "' section has no case " << k.name;
      if (world->rank() == 0)
        std::printf("skipped %s: the fixture has no section for this machine (GEMM kernels and processor: '%s') with "
                    "it\n",
                    k.name.c_str(), machine.c_str());
      continue;
    }
    auto history = train::train(k.config, k.one_rank ? self : world);
    for (const auto& m : history) {
      const std::string loss = hex(m.loss), norm = hex(m.grad_norm);
      (cpu ? mine : any) << k.name << " " << m.step << " " << loss << " " << norm << "\n";
      if (record) continue;
      ASSERT_LT(static_cast<size_t>(m.step), want->size());
      EXPECT_EQ(loss, (*want)[m.step].first) << "loss, step " << m.step;
      EXPECT_EQ(norm, (*want)[m.step].second) << "gradient norm, step " << m.step;
      compared++;
      if (!cpu) ref_compared++;
    }
  }
  if (record && world->rank() == 0) {
    std::ofstream f(record);
    f << "# GPT-2 losses and gradient norms (C99 %a), recorded by tests/mpi/train/test_gpt2_bitwise.cpp\n"
      << any.str() << mine.str();
    ASSERT_TRUE(f.good()) << "cannot write " << record;
    std::printf("recorded %s\n", record);
  }
  if (!record) {
    EXPECT_GT(ref_compared, 0) << "no ref case was compared";
    if (world->rank() == 0) std::printf("%d steps bit-identical to the fixture (%d of them ref)\n", compared, ref_compared);
  }
}

}  // namespace
}  // namespace axonn
