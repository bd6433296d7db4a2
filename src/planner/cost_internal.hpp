// Pieces of the cost model shared by its two implementations' step models (cost_model.cpp:
// megatron-axonn and as-coded; cost_axonn_cpp.cpp: this project's CPU path). Private to planner.
#pragma once

#include <string>
#include <vector>

#include "axonn/planner/cost_model.hpp"

namespace axonn::planner::internal {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline double d(long v) { return static_cast<double>(v); }

// Position of a group in the grid's rank order: ip = its smallest stride (for one axis, the product
// of the faster axes); its size.
long group_ip(CommGroup grp, const GridShape& g);
long group_size(CommGroup grp, const GridShape& g);

// Appends one collective (all its calls in a step) unless its group has a single rank or there are
// no calls: calls·(c·(p−1)/p·M/β + c·(p−1)·α), β and α of this collective and position.
void add(std::vector<CollectiveCost>* out, const MachineProfile& m, const CostSettings& s, const GridShape& g,
         std::string what, CommGroup grp, CollectiveKind kind, double message_bytes, double calls, Hiding hiding);

// What of one linear layer's collectives (all calls of a step) overlap does not hide: OAR under the
// layer's dW GEMM (`dw_s`), OAR with the Z all-gathers and reduce-scatters under all of its GEMMs
// (`layer_s`), the rest blocking (spec §4; docs/perf-model.md §6).
double exposed_linear(const std::vector<CollectiveCost>& collectives, double dw_s, double layer_s);

// Parameters per rank, from the model's tensors: norms and biases; vocabulary tensors (vocabulary-
// parallel over X·Y) and the position embedding; the Z-sharded tensor-parallel weights.
double small_params_per_rank(const Workload& w, const GridShape& g);
double embedding_params_per_rank(const Workload& w, const GridShape& g);
double tp_params_per_rank(const Workload& w, const GridShape& g);
// Features of one block's [T, ·/Gy] activations (normal linears' outputs, transposed ones' inputs).
double intermediate_features(const Workload& w);

// The step of this project's CPU implementation (CostSettings::implementation == kAxonnCpp).
Estimate estimate_axonn_cpp(const MachineProfile& m, const Workload& w, const GridShape& g, const CostSettings& s);

}  // namespace axonn::planner::internal
