// infer/setup.hpp — the inference set-up, written once for `axonn generate`, `axonn memorization` and
// bench_generate: the compute (kernels, GPU, the grid's communicator: launch/compute.hpp), the grid from
// --grid (checked against the job), what each rank will allocate (the weights' shards, the KV cache and
// one chunk's activations, the logits) logged and checked against its node's free memory before anything
// is allocated, then the Generator on the grid with the model's weights: loaded into its shards from a
// model on disk, or random (a benchmark's).
//
//   infer::InferenceRequest r;
//   r.source = checkpoint::find_model_source("runs/x/checkpoints");
//   r.config = r.source->config;
//   r.sequences = 4; r.context = 80;
//   r.command = "axonn generate with 4 samples of 80 positions"; r.advice = "use a smaller --num-samples";
//   infer::InferenceSetup s = infer::set_up_inference(r);   // collective over the world
//   s.generator->generate(prompt, options);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "axonn/checkpoint/model_source.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/launch/compute.hpp"
#include "axonn/parallel/grid.hpp"

namespace axonn::infer {

struct InferenceRequest {
  model::GptConfig config;                       // the model (a source's own configuration)
  std::optional<checkpoint::ModelSource> source;  // its weights on disk; none: random weights from random_seed
  uint64_t random_seed = 1337;
  std::string grid;  // --grid's text (layout::parse_grid; empty: the default)
  int sequences = 1;  // sequences at once
  int context = 0;    // positions each
  kernels::Backend backend = kernels::Backend::kCpu;
  DType precision = DType::kF32;
  std::string tag = "generate";  // begins the log line of the memory per rank
  std::string command;           // the run in a refusal: "axonn generate with 4 samples of 80 positions"
  std::string advice;            // what to change when it does not fit
};

struct InferenceSetup {
  launch::Compute compute;
  std::unique_ptr<parallel::Grid> grid;  // over compute.grid_world
  std::unique_ptr<Generator> generator;
  std::string loaded;  // what the weights are, for the log (checkpoint::load_weights, or "random weights")
};

// Collective over the world. Throws InvalidArgument alike on every rank for a grid that does not fit the
// job, a backend this build cannot run, or memory the nodes do not have, before anything large is allocated.
InferenceSetup set_up_inference(const InferenceRequest& request);

}  // namespace axonn::infer
