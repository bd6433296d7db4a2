// planner/step_collectives.hpp — every collective one training step of this project's model issues
// (src/model/*.cpp: the step, the GPT-2 and Llama blocks, the gradient sync), derived from the model's
// tensor list (model/spec.hpp), not written out per model:
//   - each norm weight of a block (or the final norm): its statistics all-reduced over X (LayerNorm:
//     mean and variance forward, one row sum of 2N backward; RMSNorm: one row sum each way);
//   - each tensor-parallel linear: its forward all-reduce over the input group, its backward dx
//     all-reduce over the output group, the weight-gradient reduce-scatter over Z, the weight shard's
//     sum over data, and its weight all-gathers over Z (counted as parallel/overlap.hpp's
//     WeightGather takes them: two buffers, a block still held is not gathered again);
//   - the vocabulary tensors: the embedding's all-reduce over X*Y and its gradient's all-gather over X;
//     the LM head's input all-gather over X and gradient all-reduce over X*Y, the cross-entropy's row
//     max and sums over X*Y; the loss over Z and over data;
//   - the gradient sums over Z*data: per stage (a block, the head, the embeddings) one packed bucket of
//     its norms and biases, and each vocabulary or position embedding in place; the norm over X*Y*Z.
// The cost model of the axonn-cpp implementation (cost_model.hpp, docs/perf-model.md §10) prices
// exactly this list; tests/mpi/planner checks it against the collectives a traced step issued, for
// both families on several grids.
//
//   StepShape s;  s.tokens = 8 * 256;
//   for (const ModelCollective& c : model_collectives(workload.spec(), {2, 2, 1, 1}, s)) ...
#pragma once

#include <string>
#include <vector>

#include "axonn/model/spec.hpp"
#include "axonn/planner/cost_model.hpp"

namespace axonn::planner {

struct StepShape {
  double tokens = 0;                 // N: this rank's tokens per micro-batch (B_local * T)
  long micro_batches = 1;            // gradient accumulation: forwards and backwards per step
  bool recompute = false;            // the backward runs each block's forward again (not the last)
  bool cache_gathered_weights = false;  // every weight gathered once per step
  double activation_bytes = 4;       // 4 fp32, 2 bf16: activations and the weights the kernels read
};

// One collective of the step: all its calls, each of `message_bytes` (the full gathered or reduced
// message, as the cost model prices it; an all-gather's rank sends message_bytes / group size).
struct ModelCollective {
  std::string what;  // "qkv fwd all-reduce", "lnf statistics all-reduce", ...
  CommGroup group = CommGroup::kX;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  double message_bytes = 0;
  double calls = 0;         // per optimizer step
  bool block = false;       // issued by the blocks (calls / layers per block)
  Hiding hiding = Hiding::kNone;  // what it can run under with --overlap (the trainer's hiding rules)
  int linear = -1;          // the index in spec.linears of the linear that issues it, -1 for none
};

// Elements of each tensor (all its layers) that the rank of grid g with the largest shards holds: the
// model's own layout (model::ShardMap), so the planner's counts are the arenas' (one statement of the
// shard rule). Tensors by index in spec.params; g must fit the model (model::grid_misfit).
std::vector<double> local_elements(const model::ModelSpec& spec, const GridShape& g);

// The collectives of one step over groups of more than one rank, in the order the step first issues
// them. The grid must hold the model (model::grid_misfit); the vocabulary is taken as split evenly
// over X*Y (exact when X*Y divides the padded vocabulary).
std::vector<ModelCollective> model_collectives(const model::ModelSpec& spec, const GridShape& g, const StepShape& s);

}  // namespace axonn::planner
