// GPT-2 is unchanged by the model layer's redesign (issue 14): llm.c's reference run on one rank, and
// grids of 4 ranks with overlap, micro-batches, recompute, weight decay and clipping, give losses and
// gradient norms BIT-identical to those recorded at commit 594ee27, the last before the redesign
// (tests/golden/gpt2-bitwise/trajectories.txt). The cpu-bf16 cases were recorded again, on purpose, when
// cpu_bf16's attention became flash-style (issue 19: its GEMMs sum in another order); the fp32 and ref
// cases are still 594ee27's, and they did not change.
//
// The cases with `--kernels ref` (naive loops, no BLAS) hold on any x86 machine built with this
// compiler. The `--kernels cpu` cases depend on the GEMM library's kernels, which depend on the CPU:
// they are compared where the fingerprint recorded with them (the bf16 GEMM kernel oneDNN picks, and
// the sgemm backend) is this machine's, and skipped with a message elsewhere.
//
// To record again (only on purpose, on the commit the fixture should describe):
//   export AXONN_BITWISE_RECORD=tests/golden/gpt2-bitwise/trajectories.txt   (from the repository root)
//   mpirun -np 4 -x AXONN_BITWISE_RECORD -x OMP_NUM_THREADS=1 build/bin/test_mpi_gpt2_bitwise
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

// What the cpu-kernel bits depend on besides the code: the GEMM library's choice of kernels.
std::string machine_fingerprint() {
  return std::string(kernels::gemm_backend_name(kernels::gemm_backend())) + " bf16:" + kernels::gemm_bf16_kernel();
}

std::string hex(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}

struct Recorded {
  std::string fingerprint;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> steps;  // case -> (loss, norm)
};

Recorded read_fixture(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  Recorded r;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("# machine: ", 0) == 0) r.fingerprint = line.substr(11);
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string name, loss, norm;
    int step = 0;
    is >> name >> step >> loss >> norm;
    EXPECT_EQ(step, static_cast<int>(r.steps[name].size())) << path << ": " << line;
    r.steps[name].push_back({loss, norm});
  }
  return r;
}

TEST(Gpt2Bitwise, LossesAndNormsEqualTheRecordedCommit) {
  auto world = comm::world();
  ASSERT_EQ(world->size(), 4) << "the fixture's grids have 4 ranks";
  std::shared_ptr<comm::Communicator> self(world->split(world->rank(), 0, "self"));
  const char* record = std::getenv("AXONN_BITWISE_RECORD");
  const Recorded fixture =
      record ? Recorded{} : read_fixture(AXONN_GOLDEN_DIR "/gpt2-bitwise/trajectories.txt");
  const bool same_machine = record || fixture.fingerprint == machine_fingerprint();
  std::ostringstream out;
  out << "# GPT-2 losses and gradient norms (C99 %a), recorded by tests/mpi/train/test_gpt2_bitwise.cpp\n"
      << "# machine: " << machine_fingerprint() << "\n";
  int compared = 0;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const bool cpu = k.config.kernels == "cpu";
    if (!record && cpu && !same_machine) {
      if (world->rank() == 0)
        std::printf("skipped %s: recorded with GEMM kernels '%s', this machine has '%s'\n", k.name.c_str(),
                    fixture.fingerprint.c_str(), machine_fingerprint().c_str());
      continue;
    }
    auto history = train::train(k.config, k.one_rank ? self : world);
    for (const auto& m : history) {
      const std::string loss = hex(m.loss), norm = hex(m.grad_norm);
      out << k.name << " " << m.step << " " << loss << " " << norm << "\n";
      if (record) continue;
      auto it = fixture.steps.find(k.name);
      ASSERT_NE(it, fixture.steps.end()) << "the fixture has no case " << k.name;
      ASSERT_LT(static_cast<size_t>(m.step), it->second.size());
      EXPECT_EQ(loss, it->second[m.step].first) << "loss, step " << m.step;
      EXPECT_EQ(norm, it->second[m.step].second) << "gradient norm, step " << m.step;
      compared++;
    }
  }
  if (record && world->rank() == 0) {
    std::ofstream f(record);
    f << out.str();
    ASSERT_TRUE(f.good()) << "cannot write " << record;
    std::printf("recorded %s\n", record);
  }
  if (!record && world->rank() == 0) std::printf("%d steps bit-identical to the recorded commit\n", compared);
}

}  // namespace
}  // namespace axonn
