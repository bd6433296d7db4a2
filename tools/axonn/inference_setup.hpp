// tools/axonn/inference_setup.hpp — the set-up that `axonn generate` and `axonn memorization` share, written once:
// the grid from --grid (checked against the job), what each rank will allocate (the weights' shards, the KV cache
// and one chunk's activations, the logits) logged and checked against its node's free memory before anything is
// allocated, then the Generator on the grid with the model's weights loaded into its shards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "axonn/checkpoint/model_source.hpp"
#include "axonn/infer/generator.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/parallel/grid.hpp"

namespace axonn::tools {

struct InferenceSetup {
  std::unique_ptr<parallel::Grid> grid;
  std::unique_ptr<infer::Generator> generator;
  std::string loaded;  // what was loaded, for the log (checkpoint::load_weights)
};

// `sequences` sequences of `context` positions at once. `tag` begins the log line ("generate"), `command` names
// the run in a refusal ("axonn generate with 4 samples of 80 positions") and `advice` says what to change.
InferenceSetup set_up_inference(const checkpoint::ModelSource& source, const std::string& grid_text, int sequences,
                                int context, kernels::Backend backend, DType precision, const char* tag,
                                const std::string& command, const std::string& advice);

}  // namespace axonn::tools
