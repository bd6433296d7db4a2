// The planner's memory per rank against the model's own arenas: for both families, on every grid of
// 1–8 ranks that holds the model, the planner's estimate of this project's step (axonn-cpp) is set
// beside what model::Gpt::memory_need reserves on each rank of that grid (the largest rank). The
// parameters, gradients and AdamW moments come from one shard rule (model::ShardMap) and must agree
// to the byte, but for the arenas' alignment gaps (each tensor's slice starts on 64 bytes); the
// activations are the planner's closed form against the arenas: it may overestimate (a plan that
// fits must fit), within the bound below, and never underestimate. The test prints every grid's
// figures and the largest relative difference (docs/perf-model.md quotes it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "axonn/kernels/ops.hpp"
#include "axonn/layout/grid.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/machine.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;
namespace am = axonn::model;
namespace al = axonn::layout;

namespace {

// The largest relative excess of the planner's memory per rank over the arenas' on any grid (the
// activations' closed form is the only approximate part: it counts two layers of backward scratch,
// which weighs most on these 2-layer models).
constexpr double kTotalBound = 0.40;

struct Measured {
  double params = 0, total = 0;
};

// The rank of the grid that needs the most memory, as the model reserves it (fp32, no recompute, the
// trainer's default overlap); AdamW's moments mirror the gradients.
Measured measure(const am::GptConfig& c, const al::GridShape& g, int micro_seqs, int T) {
  am::GptRunOptions run;
  run.overlap = axonn::parallel::parse_overlap("all");
  Measured most;
  for (int r = 0; r < g.size(); r++) {
    const am::GptMemory m =
        am::Gpt::memory_need(c, g, al::grid_coords(g, r), micro_seqs, T, axonn::kernels::Backend::kCpu, run);
    const double total = static_cast<double>(m.params + m.grads + 2 * m.grads + m.activations + m.comm_buffers);
    most.params = std::max(most.params, static_cast<double>(m.params));
    most.total = std::max(most.total, total);
  }
  return most;
}

TEST(PlannerMemory, EqualsTheModelsArenasOnEveryGridOfUpTo8Ranks) {
  // this project's step on any machine (memory does not depend on the machine's speeds), as
  // `train --grid auto` prices it
  ap::MachineProfile machine = ap::load_machine_profile("perlmutter");
  machine.implementation = ap::Implementation::kAxonnCpp;
  const ap::CostSettings settings = ap::settings_for(machine, /*overlap=*/true);
  const int B = 840, T = 32;  // every Gz·Gdata of 1–8 divides 840
  double worst = 0;
  std::string worst_at;
  int grids = 0;
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    ap::Workload w;
    w.model = {name, am::gpt_preset(name), 1};
    w.seq_len = T;
    w.batch_size = B;
    w.positions = std::max<long>(w.model.config.max_seq_len, T);
    for (long G = 1; G <= 8; G++) {
      for (const al::GridShape& g : ap::factorizations(G)) {
        if (ap::inadmissible_reason(w, g, 1)) continue;
        grids++;
        const ap::Estimate e = ap::estimate(machine, w, g, settings);
        const Measured m = measure(w.model.config, g, B / (g.gz * g.gdata), T);
        const double rel = std::fabs(e.memory.total() - m.total) / m.total;
        std::printf("%-10s grid %-8s weights %9.0f / %9.0f B  total %11.0f / %11.0f B (planner / arenas)  %+.3f\n",
                    name, g.str().c_str(), e.memory.weights, m.params, e.memory.total(), m.total,
                    (e.memory.total() - m.total) / m.total);
        const double gaps = 64.0 * static_cast<double>(am::model_spec(w.model.config).params.size());
        EXPECT_GE(m.params - e.memory.weights, 0.0) << name << " " << g.str();
        EXPECT_LT(m.params - e.memory.weights, gaps) << name << " " << g.str();
        EXPECT_EQ(e.memory.grads, e.memory.weights) << name << " " << g.str();
        EXPECT_EQ(e.memory.optimizer, 2 * e.memory.weights) << name << " " << g.str();
        EXPECT_GE(e.memory.total(), m.total) << name << " " << g.str() << ": the planner must not promise a fit";
        if (rel > worst) worst = rel, worst_at = std::string(name) + " " + g.str();
      }
    }
  }
  std::printf("largest relative difference of the memory per rank: %.3f (%s), over %d grids\n", worst,
              worst_at.c_str(), grids);
  EXPECT_GE(grids, 40);
  EXPECT_LE(worst, kTotalBound) << worst_at;
}

}  // namespace
