// bench/gpt2_step — one training step of GPT-2 124M on the CPU: ms/step, tokens/s and MFU against
// the sgemm rate measured in the same run, with the same GEMM backend and thread count.
//
//   build/bin/bench_gpt2_step [--gemm onednn|openblas] [--steps N] [--shapes 4x64,8x256] [--model NAME] [--profile 0|1]
//
// MFU = model FLOPs of the step (model::Gpt::flops_per_step: 6 FLOPs per weight per token for the
// matmuls incl. the LM head, plus attention) / step time / measured sgemm peak.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  std::string gemm = "onednn", model_name = "gpt2-124m", shapes = "4x64,8x256";
  int steps = 3;
  bool profile = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--gemm")) gemm = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--model")) model_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--profile")) profile = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  try {
    kernels::set_gemm_backend(kernels::parse_gemm_backend(gemm));
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    double peak = kernels::measure_sgemm_gflops(2048, 5);
    std::printf("# GEMM %s, %d threads, OPENBLAS_CORETYPE=%s\n", gemm.c_str(), kernels::cpu_threads(),
                coretype ? coretype : "(unset)");
    std::printf("# peak: sgemm 2048^3 = %.1f GFLOP/s (measured now)\n", peak);
    std::printf("%-10s %-6s %-6s %10s %12s %10s %8s %8s\n", "model", "B", "T", "ms/step", "tokens/s", "GFLOP/s",
                "MFU", "loss");
    model::GptConfig cfg = model::gpt_preset(model_name);
    size_t pos = 0;
    while (pos < shapes.size()) {
      size_t comma = shapes.find(',', pos);
      std::string s = shapes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? shapes.size() : comma + 1;
      int B = std::atoi(s.c_str()), T = std::atoi(s.c_str() + s.find('x') + 1);
      auto world = comm::world();
      parallel::Grid grid({1, 1, 1, 1}, world);
      model::Gpt gpt(cfg, grid, B, T, kernels::Backend::kCpu);
      gpt.init_random(1);
      const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
      optim::AdamW opt(gpt.params(), {}, {}, ops);
      std::vector<int> in(static_cast<size_t>(B) * T), tg(in.size());
      for (size_t i = 0; i < in.size(); i++) {
        in[i] = static_cast<int>((i * 7919) % static_cast<size_t>(cfg.vocab_size));
        tg[i] = static_cast<int>((i * 104729 + 1) % static_cast<size_t>(cfg.vocab_size));
      }
      Profiler prof;
      gpt.set_profiler(&prof);
      auto step = [&] {
        float loss = gpt.forward(in.data(), tg.data());
        {
          ProfileScope zs(&prof, "zero_grad");
          gpt.zero_grad();
        }
        gpt.backward();
        gpt.sync_gradients();
        ProfileScope os(&prof, "optimizer (norm + adamw)");
        opt.step(gpt.params(), gpt.grads(), 1e-4f, optim::clip_scale(gpt.grad_norm(), 1.0f));
        return loss;
      };
      step();  // warm-up: page faults, GEMM kernel selection
      prof.enable(true);
      Timer t;
      float loss = 0;
      for (int i = 0; i < steps; i++) loss = step();
      double sec = t.seconds() / steps;
      double gflops = gpt.flops_per_step() / sec / 1e9;
      std::printf("%-10s %-6d %-6d %10.1f %12.0f %10.1f %8.3f %8.4f\n", model_name.c_str(), B, T, sec * 1e3,
                  B * T / sec, gflops, gflops / peak, loss);
      if (profile) {
        std::printf("  time per op over %d steps:\n", steps);
        prof.print(stdout);
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
