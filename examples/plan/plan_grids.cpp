// plan_grids — ask axonn's planner which 4D grid trains a model fastest, from C++.
//
//   plan_grids [MODEL] [GPUS] [BATCH] [MACHINE]      (defaults: gpt2-1558m 64 512 perlmutter)
//
// The planner needs no MPI and no GPU: it is a cost model of communication, compute and memory, searched
// over every grid Gx*Gy*Gz*Gdata = GPUS (docs/perf-model.md). This program prints the best grids, then
// checks its first pick against an estimate of that grid made directly.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/planner/planner.hpp"

namespace planner = axonn::planner;

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "gpt2-1558m";
  const long gpus = argc > 2 ? std::atol(argv[2]) : 64;
  const long batch = argc > 3 ? std::atol(argv[3]) : 512;
  const std::string machine_name = argc > 4 ? argv[4] : "perlmutter";
  try {
    const auto shape = planner::find_model(model);
    AXONN_CHECK_ARG(shape, "unknown model '", model, "'");
    planner::PlanRequest req;
    req.workload.model = *shape;
    req.workload.batch_size = batch;  // of sequences of the planner's default length, as axonn plan's

    req.gpus = gpus;
    req.min_tp = shape->min_tp;
    const planner::MachineProfile machine = planner::load_machine_profile(machine_name);  // built in
    req.settings = planner::settings_for(machine);

    const planner::PlanResult r = planner::plan(machine, req);
    std::printf("%s on %ld GPUs of %s, batch %ld sequences of %ld tokens: %ld grids tried, %ld admissible, %ld fit\n",
                shape->name.c_str(), gpus, machine.name.c_str(), batch, req.workload.seq_len, r.factorizations,
                r.admissible, r.fitting);
    for (std::size_t i = 0; i < r.configs.size() && i < 5; i++) {
      const planner::Estimate& e = r.configs[i];
      std::printf("  %zu. %s  step %.3f s (comm %.3f s)  %.1f GiB  %s\n", i + 1, planner::to_string(e.grid).c_str(),
                  e.total_s, e.comm_s, e.memory.total_gib(), e.fits ? "fits" : "does not fit");
    }
    // the search's best grid, estimated on its own, gives the same prediction
    const planner::Estimate& best = r.configs.front();
    const planner::Estimate again = planner::estimate(machine, req.workload, best.grid, req.settings);
    AXONN_CHECK(again.total_s == best.total_s, "the best grid's estimate differs when made directly");
    std::printf("best: %s, %.3f s per step, MFU %.1f%%\n", planner::to_string(best.grid).c_str(), best.total_s,
                100 * best.mfu);
    return 0;
  } catch (const axonn::Error& e) {
    std::fprintf(stderr, "plan_grids: %s\n", e.what());
    return 2;
  }
}
