// planner/workload.hpp — what is being trained: GPT shape, sequence length, batch, and FLOP counts.
//
// The GPT block has four tensor-parallel linear layers (spec §3.4): QKV (h → 3h, normal), out-proj
// (h → h, transposed), FC1 (h → 4h, normal), FC2 (4h → h, transposed). A normal layer splits its
// input features over X and output features over Y; a transposed one swaps X and Y.
//
//   auto w = axonn::planner::Workload{*axonn::planner::find_model("80B"), /*seq_len=*/2048,
//                                     /*batch_size=*/1024};
//   double f = axonn::planner::gpt_hardware_flops(w);   // 96·B·S·L·H²·(1 + S/6H + V/16LH)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::planner {

struct ModelShape {
  std::string name;  // empty for a custom shape
  long layers = 0;   // L
  long hidden = 0;   // H
  long heads = 0;
  long vocab = 0;   // V (padded, e.g. 50304 for GPT-2's 50257)
  long min_tp = 1;  // minimum Gx·Gy·Gz AxoNN's launcher used for this model (spec §3.6), 1 if none
};

// The SC24 Perlmutter models (spec §7.2: 5B … 175B, vocab 50304) and the GPT-2 family (gpt2,
// gpt2-medium, gpt2-large, gpt2-xl; vocab padded to 50304 as llm.c does).
const std::vector<ModelShape>& known_models();
// Case-insensitive lookup in known_models(); "80b" and "80B" both work, and the GPT-2 family also
// answers to `axonn train`'s names (gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m).
std::optional<ModelShape> find_model(std::string_view name);

struct Workload {
  ModelShape model;
  long seq_len = 2048;         // S
  long batch_size = 0;         // B, global, in sequences per optimizer step
  long grad_accumulation = 1;  // micro-batches per step (weights re-gathered per micro-batch)
  long positions = 0;          // rows of the position embedding (max sequence length); 0 = seq_len

  long position_rows() const { return positions > 0 ? positions : seq_len; }

  // Throws axonn::InvalidArgument naming the bad value and what to change.
  void validate() const;
  double tokens() const { return static_cast<double>(batch_size) * static_cast<double>(seq_len); }
  // Trainable parameters: 12·H² + 13·H per block, V·H (tied) + position_rows()·H embeddings, final
  // norm 2·H.
  double parameters() const;
};

// One tensor-parallel linear layer of the block.
struct LinearLayer {
  std::string name;
  long in_features = 0;
  long out_features = 0;
  bool transposed = false;  // in-features over Y, out-features over X (AxoNN's transpose=True)
};
// QKV, out-proj, FC1, FC2 for hidden size H.
std::vector<LinearLayer> block_linear_layers(long hidden);

// FLOPs per optimizer step as Megatron-AxoNN counts them (spec §7.3): hardware FLOPs with full
// activation recomputation, 96·B·S·L·H²·(1 + S/(6H) + V/(16·L·H)).
double gpt_hardware_flops(const Workload& w);
// Model FLOPs (no recomputation), 72·B·S·L·H²·(1 + S/(6H) + V/(12·L·H)); the numerator of MFU.
double gpt_model_flops(const Workload& w);

}  // namespace axonn::planner
