// bench/gemm_tuning — the GEMM layout tuner on the linear layers of a GPT block (GPT-2 124M by
// default): for each CPU GEMM backend, the three call sites of each layer (fw, bw_act, bw_w) are
// tuned as the matmul issues them, and the tuner's report is printed (every variant's time and the
// choice), then the summed time of the block's GEMMs as issued and as chosen. docs/gemm-tuning.md
// holds a measurement.
//
//   build/bin/bench_gemm_tuning [--tokens 2048] [--channels 768] [--backends onednn,openblas]
//                               [--reps 3] [--warmup 1]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  int64_t tokens = 2048, C = 768;
  std::string backends = "onednn,openblas";
  kernels::GemmTuneOptions opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--channels")) C = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--backends")) backends = argv[i + 1];
    else if (!std::strcmp(argv[i], "--reps")) opt.reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) opt.warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  try {
    kernels::gemm_tuner().set_options(opt);
    // the block's linear layers as [in, out]: qkv, attention projection, fc, fc projection
    const std::vector<std::pair<int64_t, int64_t>> layers{{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    std::printf("# GEMM layout tuning: N=%lld tokens, C=%lld, %d thread(s), warmup %d, reps %d (min)\n",
                static_cast<long long>(tokens), static_cast<long long>(C), kernels::cpu_threads(), opt.warmup,
                opt.reps);
    size_t pos = 0;
    while (pos < backends.size()) {
      const size_t comma = backends.find(',', pos);
      const std::string name = backends.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? backends.size() : comma + 1;
      kernels::set_gemm_backend(kernels::parse_gemm_backend(name));
      kernels::gemm_tuner().clear();
      for (auto [in, out] : layers) {
        // operands as the CPU matmul has them: inp [N,in], weight [out,in], dout [N,out]
        std::vector<float> x(static_cast<size_t>(tokens * in), 0.5f), w(static_cast<size_t>(out * in), 0.25f),
            y(static_cast<size_t>(tokens * out), 0.0f), dy(static_cast<size_t>(tokens * out), 0.125f),
            dx(static_cast<size_t>(tokens * in), 0.0f), dw(static_cast<size_t>(out * in), 0.0f);
        kernels::GemmEngine& e = kernels::cpu_gemm_engine();
        kernels::gemm_tuner().gemm(e, "fw", {false, true, tokens, out, in, 1.0f, x.data(), in, w.data(), in, 1.0f,
                                             y.data(), out});
        kernels::gemm_tuner().gemm(e, "bw_act", {false, false, tokens, in, out, 1.0f, dy.data(), out, w.data(), in,
                                                 1.0f, dx.data(), in});
        kernels::gemm_tuner().gemm(e, "bw_w", {true, false, out, in, tokens, 1.0f, dy.data(), out, x.data(), in,
                                               1.0f, dw.data(), in});
      }
      double issued = 0, chosen = 0;
      for (const auto& r : kernels::gemm_tuner().records()) {
        std::printf("%s\n", r.str().c_str());
        for (const auto& c : r.candidates) {
          if (c.variant == kernels::kAsIssued) issued += c.seconds;
          if (c.variant == r.chosen) chosen += c.seconds;
        }
      }
      std::printf("# %s: the block's 12 GEMMs take %.1f ms as issued, %.1f ms as chosen (%.3fx)\n", name.c_str(),
                  issued * 1e3, chosen * 1e3, issued / chosen);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
