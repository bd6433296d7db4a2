// infer/setup.cpp — the inference set-up of generate, memorization and bench_generate (infer/setup.hpp).
#include "axonn/infer/setup.hpp"

#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/launch/memory_check.hpp"

namespace axonn::infer {

InferenceSetup set_up_inference(const InferenceRequest& r) {
  const model::GptConfig& mc = r.config;
  auto world = comm::world();
  const parallel::GridShape shape = parallel::parse_grid(r.grid, world->size());
  parallel::check_grid(shape, world->size());
  // on several GPUs the grid's communicators move device buffers, while the weights are loaded and the sampled
  // ids broadcast through host buffers: not written yet, so a GPU generates on one rank
  AXONN_CHECK_ARG(r.backend != kernels::Backend::kCuda || world->size() == 1, "--kernels cuda: generation on a "
                  "GPU runs on one rank, this job has ", world->size(), "; use mpirun -np 1, or --kernels cpu");
  const model::GptMemory need = Generator::memory_need(mc, shape, parallel::grid_coords(shape, world->rank()),
                                                       r.sequences, r.context, r.backend, r.precision);
  // the logits of every sequence's last position, all V of them on every rank, twice (the model's padded rows
  // summed over X*Y, and the sampler's)
  const uint64_t logits = sizeof(float) * static_cast<uint64_t>(r.sequences) *
                          static_cast<uint64_t>(mc.vocab_size + mc.padded_vocab_size);
  const double MiB = 1024.0 * 1024.0;
  log_info("%-9s memory per rank (%s): weights %.1f MiB, activations and KV cache %.1f MiB, comm buffers %.1f MiB, "
           "logits %.1f MiB (no gradients, no optimizer state)",
           r.tag.c_str(), std::string(precision_name(r.precision)).c_str(), static_cast<double>(need.params) / MiB,
           static_cast<double>(need.activations) / MiB, static_cast<double>(need.comm_buffers) / MiB,
           static_cast<double>(logits) / MiB);
  // the node's free memory holds what lives in host memory: with the CUDA kernels the model (weights,
  // activations, KV cache) is device memory, whose allocation names the device's free memory if it fails,
  // as training's check does; the sampler's logits stay on the host
  std::vector<launch::MemoryPart> host_parts = {{"logits", logits}};
  if (kernels::backend_device(r.backend) == Device::kCpu)
    host_parts.insert(host_parts.begin(), {{"weights", need.params},
                                           {"activations and KV cache", need.activations},
                                           {"comm buffers", need.comm_buffers}});
  launch::check_node_memory(*world, host_parts, r.command, r.advice);
  InferenceSetup s;
  s.compute = launch::setup_compute(r.backend, "", world);
  s.grid = std::make_unique<parallel::Grid>(shape, s.compute.grid_world);
  s.generator = std::make_unique<Generator>(mc, *s.grid, r.sequences, r.context, r.backend, r.precision);
  if (r.source) {
    s.loaded = checkpoint::load_weights(*r.source, *s.grid, s.generator->model());
  } else {
    s.generator->model().init_random(r.random_seed);
    s.generator->model().weights_updated();
    s.loaded = "random weights (seed " + std::to_string(r.random_seed) + ")";
  }
  return s;
}

}  // namespace axonn::infer
