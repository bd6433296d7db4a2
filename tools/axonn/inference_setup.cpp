// The inference set-up of generate and memorization (inference_setup.hpp).
#include "inference_setup.hpp"

#include "axonn/comm/factory.hpp"
#include "axonn/core/log.hpp"
#include "axonn/train/memory_check.hpp"

namespace axonn::tools {

InferenceSetup set_up_inference(const checkpoint::ModelSource& source, const std::string& grid_text, int sequences,
                                int context, kernels::Backend backend, DType precision, const char* tag,
                                const std::string& command, const std::string& advice) {
  const model::GptConfig& mc = source.config;
  auto world = comm::world();
  const parallel::GridShape shape = parallel::parse_grid(grid_text, world->size());
  parallel::check_grid(shape, world->size());
  const model::GptMemory need = infer::Generator::memory_need(mc, shape, parallel::grid_coords(shape, world->rank()),
                                                              sequences, context, backend, precision);
  // the logits of every sequence's last position, all V of them on every rank, twice (the model's padded rows
  // summed over X*Y, and the sampler's)
  const uint64_t logits = sizeof(float) * static_cast<uint64_t>(sequences) *
                          static_cast<uint64_t>(mc.vocab_size + mc.padded_vocab_size);
  const double MiB = 1024.0 * 1024.0;
  log_info("%-9s memory per rank (%s): weights %.1f MiB, activations and KV cache %.1f MiB, comm buffers %.1f MiB, "
           "logits %.1f MiB (no gradients, no optimizer state)",
           tag, std::string(precision_name(precision)).c_str(), static_cast<double>(need.params) / MiB, static_cast<double>(need.activations) / MiB,
           static_cast<double>(need.comm_buffers) / MiB, static_cast<double>(logits) / MiB);
  train::check_node_memory(*world, {{"weights", need.params}, {"activations and KV cache", need.activations},
                                    {"comm buffers", need.comm_buffers}, {"logits", logits}},
                           command, advice);
  InferenceSetup s;
  s.grid = std::make_unique<parallel::Grid>(shape, world);
  s.generator = std::make_unique<infer::Generator>(mc, *s.grid, sequences, context, backend, precision);
  s.loaded = checkpoint::load_weights(source, *s.grid, s.generator->model());
  return s;
}

}  // namespace axonn::tools
