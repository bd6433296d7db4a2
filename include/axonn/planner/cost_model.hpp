// planner/cost_model.hpp — predicted step time and memory of one 4D configuration.
//
// Three parts (docs/perf-model.md has the derivation):
//  * communication: every collective of a training step, per group, with the ring cost
//    t = steps·α + c·(p−1)/p·M/β(ip, p)   (c = 1 all-gather / reduce-scatter, 2 all-reduce);
//    `ModelVariant::kAsCoded` reproduces AxoNN's comm_model.py exactly (spec §5.2), including its
//    volume slip for transposed layers, its fixed factors (forward collectives ×2 for recompute, three
//    Z collectives per micro-batch) and its GiB units; `kCorrected` (default) fixes the transposed
//    layers, follows the settings below, adds α, the embedding / LM head and the non-TP parameters;
//  * compute: GEMM FLOPs per rank (attention core replicated over X, spec §3.4) at peak × efficiency,
//    plus the memory-bound kernels at the HBM bandwidth; overlap (OAR/ORS/OAG, spec §4) hides the
//    asynchronous collectives behind the layer's GEMMs and only what sticks out adds to the step;
//  * memory per rank: weights, gradients, optimizer state, activations, gathered-weight buffers.
//
//   CostSettings s;                                 // corrected, recompute on, overlap on
//   Estimate e = estimate(machine, workload, GridShape{1, 1, 1024, 1}, s);
//   e.total_s, e.comm_s, e.memory.total_gib(), e.fits
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/layout/grid.hpp"
#include "axonn/planner/machine.hpp"
#include "axonn/planner/workload.hpp"

namespace axonn::planner {

// The grid and its groups are layout/grid.hpp's: the ranks run through X, Y and Z in the grid's order,
// fastest first, then data; the order decides where each group sits in the rank order (its ip,
// layout::grid_group_spans), so which groups share a node; nothing else.
using layout::GridShape;
using CommGroup = layout::GridGroup;
// "(Gx,Gy,Gz,Gdata)=(1,1,1024,1)", followed by " order z,x,y" when the order is not x,y,z.
std::string to_string(const GridShape& g);

enum class ModelVariant { kCorrected, kAsCoded };
std::string_view to_string(ModelVariant v);  // "corrected", "as-coded"
// Throws axonn::InvalidArgument for anything but "corrected" / "as-coded".
ModelVariant parse_model_variant(std::string_view text);

struct CostSettings {
  ModelVariant variant = ModelVariant::kCorrected;
  // Which code's step is modelled (corrected variant only). kAxonnCpp: this project's CPU path —
  // its own list of collectives (docs/parallelism.md: embedding and LM head over X·Y, LayerNorm
  // statistics over X, loss and gradient-norm reductions, per-tensor gradient syncs), GEMM calls
  // counted for the profile's per-call cost; use settings_for() to get its precision and schedule.
  Implementation implementation = Implementation::kMegatronAxonn;
  // The following apply to the corrected variant; as-coded has AxoNN's SC24 factors built in.
  bool recompute = true;              // full activation recompute: forward collectives run twice
  bool regather_in_backward = false;  // re-gather Ŵ over Z in backward (develop) instead of saving it (SC24)
  bool latency = true;                // α per ring step, where the profile gives one
  bool embedding = true;              // embedding, LM head, cross-entropy, non-TP parameter sync
  // Both variants.
  bool overlap = true;         // OAR + ORS + OAG: asynchronous collectives hide behind GEMMs
  double comm_bytes = 2;       // bf16 activations and weights on the wire
  double grad_sync_bytes = 4;  // fp32 gradients in the data-parallel all-reduce
  // Memory model (bytes per parameter of the local shard): bf16 weight, fp32 gradient, fp32 master
  // weight + Adam m and v.
  double weight_bytes = 2, grad_bytes = 4, optimizer_bytes = 12;
  double memory_headroom = 0.9;  // fraction of the GPU memory a plan may use
};

// The settings a machine's software runs with: the defaults above for megatron-axonn profiles; for
// axonn-cpp (the `local` profile `axonn calibrate` writes) fp32 everywhere (4-byte activations,
// weights, gradients, AdamW m and v, no master copy), no recompute, weights re-gathered in the
// backward, no overlap.
CostSettings settings_for(const MachineProfile& m);
// The same for a run with `overlap`: axonn-cpp's trainer overlaps unless --overlap none (its default
// is all); the megatron-axonn settings always do.
CostSettings settings_for(const MachineProfile& m, bool overlap);

// "X", "Y", "Z", "data", "X*Y", "Z*data", "X*Y*Z" (the plan's names of the groups).
std::string_view to_string(CommGroup g);
// What a collective can hide behind when overlap is on (spec §4).
enum class Hiding {
  kNone,           // blocking: forward all-reduces, data-parallel and embedding syncs
  kUnderDataGrad,  // OAR: the backward all-reduce of dX runs under the dW GEMM of the same layer
  kUnderLayer,     // OAG prefetch / ORS: Z all-gathers and reduce-scatters run under the layer's GEMMs
  kUnderBackward,  // DP (axonn-cpp): the gradient sums of a layer run under the backward of the layers before it
};

// One collective of a step, with everything that went into its cost.
struct CollectiveCost {
  std::string what;  // e.g. "FC2 fwd all-reduce"
  CommGroup group = CommGroup::kX;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  long group_size = 1;
  long ip = 1;               // inner product of the group's position (spec §5.1): its smallest stride
  bool ring = true;          // its ranks are ip apart (an (ip, size) position); false: a compound group
                             // whose axes are not neighbours in the order (X·Y with Z between them),
                             // priced by the profile's two-level fallback
  double message_bytes = 0;  // M: full (gathered / reduced) message per call
  double calls = 0;          // calls per optimizer step (micro-batches × repeats)
  double bandwidth_gbs = 0;  // β(ip, group_size)
  bool inside_node = false;  // every group of it on one node (MachineProfile::overlap_share)
  double seconds = 0;        // per step, all calls
  Hiding hiding = Hiding::kNone;
};

// The collectives of one linear layer over one optimizer step. `tokens` is the global B·S of the
// step; micro-batches come from `grad_accumulation`. Empty groups (size 1) are left out.
std::vector<CollectiveCost> linear_layer_collectives(const MachineProfile& m, const LinearLayer& layer, double tokens,
                                                     long grad_accumulation, const GridShape& g, const CostSettings& s);
// The embedding, LM head and non-tensor-parallel parameter collectives of one step (corrected
// variant with `embedding` on; empty otherwise).
std::vector<CollectiveCost> embedding_collectives(const MachineProfile& m, const Workload& w, const GridShape& g,
                                                  const CostSettings& s);
double total_seconds(const std::vector<CollectiveCost>& c);

// Communication time per step, by group (seconds, not counting overlap).
struct CommBreakdown {
  double x = 0, y = 0, z = 0, data = 0;
  double embedding = 0;  // embedding / LM head / non-TP parameters / loss and norm (X·Y, Z·data, X·Y·Z groups)
  double total() const { return x + y + z + data + embedding; }
};

// Bytes per rank at the peak of a step.
struct MemoryEstimate {
  double weights = 0, grads = 0, optimizer = 0;
  double activations = 0;       // saved for backward (+ one layer's working set)
  double logits = 0;            // fp32 vocab-parallel logits of one micro-batch
  double gathered_weights = 0;  // Ŵ buffers: current + prefetched, and one dW block
  double total() const { return weights + grads + optimizer + activations + logits + gathered_weights; }
  double total_gib() const { return total() / (1024.0 * 1024.0 * 1024.0); }
};

struct Estimate {
  GridShape grid;
  long micro_batches = 1;     // per step (Workload::grad_accumulation)
  bool recompute = false;     // activation recompute (CostSettings::recompute)
  CommBreakdown comm;         // per group, as the chosen variant computes it
  double comm_s = 0;          // comm.total()
  double exposed_comm_s = 0;  // what overlap does not hide
  double gemm_s = 0;          // GEMMs at peak × efficiency
  double memory_bound_s = 0;  // norms, activations, residuals, optimizer at HBM bandwidth
  double compute_s = 0;       // gemm_s + memory_bound_s
  double total_s = 0;         // compute_s + exposed_comm_s
  MemoryEstimate memory;
  bool fits = false;       // memory.total() <= headroom × GPU memory
  double model_flops = 0;  // per step (gpt_model_flops)
  double mfu = 0;          // model_flops / (total_s · G · peak)
};

// Predicts one configuration. The grid must divide the workload (see planner.hpp
// inadmissible_reason); throws axonn::InvalidArgument otherwise.
Estimate estimate(const MachineProfile& m, const Workload& w, const GridShape& g, const CostSettings& s);

// The memory model alone.
MemoryEstimate estimate_memory(const Workload& w, const GridShape& g, const CostSettings& s);

}  // namespace axonn::planner
