// planner/planner.hpp — search over 4D grids and ranked output (`axonn plan`).
//
// Every ordered factorization Gx·Gy·Gz·Gdata = G is tried (not only powers of two); a grid is
// admissible when it meets --min-tp and divides the model and batch (heads and hidden over Y, hidden
// over X, batch over Gdata·Gz·micro-batches, each weight block over Z). Admissible grids are
// estimated and ranked. Corrected variant: grids that fit in memory first, then by predicted step
// time. As-coded variant: by communication time alone, AxoNN's own criterion (spec §5.4; its memory
// guard is min_tp). Grids that do not fit are kept and marked, never dropped.
//
//   PlanRequest req{workload, /*gpus=*/1024};
//   req.min_tp = 64;
//   PlanResult r = plan(load_machine_profile("perlmutter"), req);
//   std::cout << format_table(r, 5);
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/machine.hpp"
#include "axonn/planner/workload.hpp"

namespace axonn::planner {

// All ordered (gx, gy, gz, gdata) with product g, gx outermost, each ascending (AxoNN's loop order).
std::vector<GridShape> factorizations(long g);

// Why a grid cannot run the workload (what to change), or nullopt when it can.
std::optional<std::string> inadmissible_reason(const Workload& w, const GridShape& g, long min_tp);

struct PlanRequest {
  Workload workload;
  long gpus = 0;
  long min_tp = 1;  // minimum Gx·Gy·Gz
  // The rank order of every grid (--grid-order), or, with search_orders, every order that places the
  // grid's groups differently (layout::distinct_orders), each ranked as its own configuration.
  layout::GridOrder order = layout::kAxonnGridOrder;
  bool search_orders = false;
  CostSettings settings;
  // Each grid with the fastest micro-batches per step and activation recompute that fit (fastest_fit), instead
  // of the workload's micro-batches and the settings' recompute (corrected variant only).
  bool search_memory = false;
  // Wording of the error when no grid is admissible: what the G things are called, and what to
  // change (defaults: `axonn plan`'s flags).
  std::string unit = "GPUs";
  std::string advice = "Change --gpus (a count with more divisors, such as a power of two), --batch-size, or --min-tp";
};

struct PlanResult {
  MachineProfile machine;
  PlanRequest request;
  long factorizations = 0;        // ordered factorizations of G tried
  long admissible = 0;            // of which divide the workload
  long fitting = 0;               // of which fit in memory
  std::vector<Estimate> configs;  // admissible grids (in each of their orders, with search_orders), best first
};

// Searches; throws axonn::InvalidArgument (saying why, and what to change) when the request is bad
// or no grid is admissible. A model that fits no grid is not an error here: every config is marked
// fits=false (the `axonn plan` command reports it as one).
PlanResult plan(const MachineProfile& m, const PlanRequest& req);

// `{"configs": [{"gx","gy","gz","gdata","comm_s","compute_s","total_s","mem_gib","fits"}, ...]}`,
// best first; top = 0 prints all.
std::string to_json(const PlanResult& r, std::size_t top);
// The human-readable table with a header describing machine, model and search.
std::string format_table(const PlanResult& r, std::size_t top);

// A grid in the degrees a Megatron or torchtitan user knows (docs/parallelism.md): "TP 4, FSDP 8, DP 2"
// for 1,4,8,2; "2D TP 2x2" when X and Y both split; "one rank" for 1,1,1,1.
// The grid at its fastest configuration that fits in memory, trading memory for time: micro-batches per step
// among the divisors of its sequences per rank, activation recompute off and on; each a full estimate. None
// when no such configuration fits (the grid needs more Z or more ranks).
std::optional<Estimate> fastest_fit(const MachineProfile& m, const Workload& w, const GridShape& g,
                                    const CostSettings& s);
// A configuration's micro-batch size: sequences per rank per micro-batch (axonn train --micro-batch-size).
long micro_batch_size(const Workload& w, const Estimate& e);

std::string grid_degrees(long gx, long gy, long gz, long gdata);

// What the table leaves to the reader: for the best grid and the next ones shown (at most 3), the
// degrees, the largest term of the step (compute or which collective), the memory and its headroom; the
// faster grids that do not fit and by how much; and the `mpirun ... axonn train` line of the best.
std::string explain_plan(const PlanResult& r);

}  // namespace axonn::planner
