// bench/gpt2_step — training steps of GPT-2 (124M by default) or of any model preset (Llama: e.g.
// llama-124m, GPT-2 124M's size) on the CPU or the GPU, on one rank or on a 4D grid under mpirun:
// ms/step, tokens/s and MFU, plus this rank's memory and, on a grid, the tensor-parallel share of
// weights and optimizer state against the expected 1/(Gx*Gy*Gz), and the measured peak resident set of
// the largest rank (RSS MiB: the process's high-water mark so far).
//
//   build/bin/bench_gpt2_step [--kernels cpu|ref|cuda] [--comm mpi|nccl|mpi-staged]
//                             [--gemm onednn|openblas] [--steps N] [--shapes 4x64,8x256]
//                             [--model NAME[,NAME...]] [--rounds R] [--grid GX,GY,GZ,GD] [--profile 0|1]
//                             [--peak-tflops P] [--gemm-tuning on|off] [--dtype fp32|bf16] [--lm-head-chunk ROWS]
//                             [--recompute 0|1] [--stretch-positions 0|1]  (1: a T beyond the preset's max_seq_len, e.g. GPT-2 at 2048,
//                                                         gets a position table of T rows; random weights)
//   mpirun -n 2 build/bin/bench_gpt2_step --grid 2,1,1,1 --shapes 8x256
//   build-cuda/bin/bench_gpt2_step --kernels cuda --dtype bf16 --shapes 16x1024 --steps 5
//   build/bin/bench_gpt2_step --model gpt2-124m,llama-124m --shapes 8x256 --rounds 3   (interleaved)
// Several models run interleaved, round by round (--rounds), on the same peak; after the rounds a
// summary line per model gives the min and median ms/step, the MFU of the median, and that of the min
// against the highest of the peaks measured before each round (on a shared machine, the least disturbed
// step against the least disturbed peak).
//
// MFU = model FLOPs of the step (model::Gpt::flops_per_step: 6 FLOPs per weight per token for the
// matmuls incl. the LM head, plus attention) / step time / peak of all ranks. The peak is
// --peak-tflops per rank when given, else measured in the same run: on the CPU the sgemm rate, or with
// --dtype bf16 the bf16 GEMM rate (kernels::gemm_bf16: oneDNN's AMX / AVX512-BF16 matmul), every rank at
// once with its threads; on the GPU the dense bf16 GEMM rate (cublasGemmEx 8192^3, bf16 inputs, fp32
// accumulation) of each rank's device. The step is `axonn train`'s (train::train_step), its time the
// slowest rank's (measure/step_bench.hpp).
// With --gemm-tuning on, the GEMM layout tuner times its variants during the warm-up step (not
// timed) and rank 0's choices are printed under each shape's line. --profile 1 prints rank 0's time per
// kernel and layer; on the GPU every region then waits for the device at both ends (device times, and a
// slower step: the waits remove the overlap of launches and kernels).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/measure/step_bench.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/memory.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/launch/compute.hpp"
#include "axonn/train/peak.hpp"
#include "axonn/train/step.hpp"

using namespace axonn;

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// Bytes of the tensor-parallel linears' weights in an arena laid out like the model's params.
double tp_weight_bytes(const model::ModelSpec& spec, const Arena& a) {
  double b = 0;
  for (const model::LinearSpec& l : spec.linears) b += static_cast<double>(a.tensor(static_cast<size_t>(l.weight)).bytes());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  std::string gemm = "onednn", model_name = "gpt2-124m", shapes = "4x64,8x256", grid_text, tuning = "off", kernels_name = "cpu",
              comm_name;
  std::string dtype = "fp32";  // bf16: mixed precision (docs/precision.md)
  int steps = 3, rounds = 1;
  bool profile = false;
  double peak_tflops = 0.0;
  int lm_head_chunk = 0;  // --lm-head-chunk ROWS (model::GptRunOptions::lm_head_chunk)
  bool recompute = false;  // --recompute 1: activation recompute (model::GptRunOptions::recompute; MFU counts the model's FLOPs only)
  bool stretch_positions = false;  // --stretch-positions 1: T beyond the preset's max_seq_len grows its table
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {  // a lone last word (--help) would otherwise start the default benchmark
      std::fprintf(stderr, "%s has no value: every flag of bench_gpt2_step takes one (--shapes 8x256 --dtype bf16 ...; "
                   "the flags are listed at the top of bench/gpt2_step.cpp)\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--gemm")) gemm = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--model")) model_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--grid")) grid_text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--profile")) profile = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--gemm-tuning")) tuning = argv[i + 1];
    else if (!std::strcmp(argv[i], "--kernels")) kernels_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--comm")) comm_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--peak-tflops")) peak_tflops = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--lm-head-chunk")) lm_head_chunk = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--recompute")) recompute = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--stretch-positions")) stretch_positions = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  try {
    auto world = comm::world();
    const bool root = world->rank() == 0;
    kernels::set_gemm_backend(kernels::parse_gemm_backend(gemm));
    kernels::set_gemm_tuning(kernels::parse_gemm_tuning(tuning));
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    // the kernels, the GPU (node-local rank) and the communicator the grid splits
    const launch::Compute compute = launch::setup_compute(kernels_name, comm_name, world);
    const bool gpu = compute.backend == kernels::Backend::kCuda;
    if (!gpu) launch::fit_threads_to_cpus();
    const DType precision = parse_precision(dtype);
    world->barrier();
    // the peak of all ranks in GFLOP/s: given per rank, or measured now by every rank at once
    const bool bf16 = precision == DType::kBF16;
    auto measure_peak = [&] {
      if (peak_tflops > 0) return static_cast<float>(1e3 * peak_tflops * world->size());
      float p = static_cast<float>(gpu ? 1e3 * launch::measure_gpu_bf16_tflops(8192, 5)
                                       : train::measure_cpu_peak_gflops(*world, bf16, train::kThoroughPeakSizes,
                                                                        train::kThoroughPeakTrials));
      if (gpu) world->all_reduce(&p, 1, DType::kF32, comm::ReduceOp::kMax);  // over world
      return p * static_cast<float>(world->size());  // every rank's
    };
    float peak = measure_peak();
    float best_peak = peak;  // with --rounds: the highest of the peaks measured before each round
    const parallel::GridShape shape = parallel::parse_grid(grid_text, world->size());
    parallel::Grid grid(shape, compute.grid_world);
    if (root) {
      if (gpu)
        std::printf("# kernels cuda on %s, comm %s, %d rank(s), grid %s, precision %s\n", compute.device_name.c_str(),
                    compute.comm.c_str(), world->size(), shape.str().c_str(), dtype.c_str());
      else
        std::printf("# kernels %s, GEMM %s (layout tuning %s), %d rank(s) x %d thread(s), grid %s, precision %s, "
                    "OPENBLAS_CORETYPE=%s\n",
                    kernels_name.c_str(), gemm.c_str(), tuning.c_str(), world->size(), kernels::cpu_threads(),
                    shape.str().c_str(), dtype.c_str(), coretype ? coretype : "(unset)");
      if (peak_tflops > 0)
        std::printf("# peak: %.1f TFLOP/s per rank (given, --peak-tflops) = %.1f GFLOP/s\n", peak_tflops, peak);
      else if (gpu)
        std::printf("# peak: dense bf16 GEMM 8192^3 (cuBLAS, fp32 accumulation) on every rank's GPU = %.1f TFLOP/s "
                    "(measured now)\n", peak / 1e3);
      else if (bf16)
        std::printf("# peak: bf16 GEMM (%s, fp32 accumulation), best of %d timings at 1024/1536/2048 on every rank "
                    "at once, the fastest rank's x ranks = %.1f GFLOP/s (measured now)\n",
                    kernels::gemm_bf16_kernel().c_str(), train::kThoroughPeakTrials, peak);
      else
        std::printf("# peak: sgemm, best of %d timings at 1024/1536/2048 on every rank at once, the fastest rank's x "
                    "ranks = %.1f GFLOP/s (measured now)\n", train::kThoroughPeakTrials, peak);
      std::printf("%-10s %-9s %-4s %-5s %10s %10s %10s %7s %9s %9s %9s %9s %7s %9s\n", "model", "grid", "B", "T",
                  "ms/step", "tokens/s", "GFLOP/s", "MFU", "loss", "rank MiB", "TP-w MiB", "TP share", "", "RSS MiB");
    }
    // the runs: every shape in turn, and for each --rounds rounds of every model (interleaved)
    struct Job {
      int B, T;
      size_t model;
      bool last;  // the shape's last run: its summary follows
    };
    std::vector<std::string> models;
    for (size_t at = 0; at <= model_name.size();) {
      const size_t comma = std::min(model_name.find(',', at), model_name.size());
      models.push_back(model_name.substr(at, comma - at));
      at = comma + 1;
    }
    std::vector<Job> jobs;
    size_t pos = 0;
    while (pos < shapes.size()) {
      size_t comma = shapes.find(',', pos);
      std::string s = shapes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? shapes.size() : comma + 1;
      int B = std::atoi(s.c_str()), T = std::atoi(s.c_str() + s.find('x') + 1);
      for (int round = 0; round < rounds; round++)
        for (size_t mi = 0; mi < models.size(); mi++) jobs.push_back({B, T, mi, round + 1 == rounds && mi + 1 == models.size()});
    }
    std::vector<std::vector<double>> seconds(models.size());  // this shape's step times, per model
    std::vector<double> flops(models.size());
    for (const Job& job : jobs) {
      if (rounds > 1 && job.model == 0 && &job != &jobs.front()) best_peak = std::max(best_peak, measure_peak());
      const int B = job.B, T = job.T;
      const int groups = shape.gz * shape.gdata, B_local = B / groups;
      if (B % groups != 0) throw InvalidArgument("batch " + std::to_string(B) + " is not divisible by Gz*Gdata");
      model::GptConfig cfg = model::gpt_preset(models[job.model]);
      // a longer position table than the preset's, for sequences beyond it (GPT-2's 1024): a benchmark of the
      // same shape at a longer T (random weights)
      if (T > cfg.max_seq_len && stretch_positions) cfg.max_seq_len = T;
      model::GptRunOptions run;
      run.precision = precision;
      run.lm_head_chunk = lm_head_chunk;
      run.recompute = recompute;
      model::Gpt gpt(cfg, grid, B_local, T, compute.backend, run);
      gpt.init_random(1);
      const auto& ops = kernels::ops_for(compute.backend);
      optim::AdamW opt(gpt.params(), {}, {}, ops);
      const measure::BenchTokens tokens = measure::bench_tokens(cfg, grid, B_local, T);
      Profiler prof;
      // --profile 1 on the GPU: every region waits for the device at its ends, so that the table holds device
      // time (and the step's ms/step the waits as well)
      if (profile && gpu) prof.set_synchronize(memory_for(Device::kCuda).synchronize);
      gpt.set_profiler(&prof);
      // the step `axonn train` runs (train::train_step), lr 1e-4, gradients clipped to norm 1
      const train::StepOptions step{.lr = 1e-4f, .grad_clip = 1.0f, .profiler = &prof, .agreement = world.get()};
      kernels::gemm_tuner().clear();  // this shape's choices only
      train::train_step(gpt, opt, tokens.batch(), step);  // warm-up: page faults, GEMM kernel selection, the tuner
      prof.enable(true);
      float loss = 0;
      const float sec = static_cast<float>(measure::time_train_steps(*world, gpt, opt, tokens.batch(), steps, step, &loss));
      seconds[job.model].push_back(sec);
      flops[job.model] = gpt.flops_per_step();
      // memory: this rank's bytes, and the tensor-parallel weights against one rank's
      const double rank_bytes = static_cast<double>(gpt.param_bytes() + gpt.grad_bytes() + opt.state_bytes() +
                                                    gpt.activation_bytes());
      const double tp = tp_weight_bytes(gpt.spec(), gpt.params());
      double tp_full = 0;
      for (const model::LinearSpec& l : gpt.spec().linears) tp_full += 4.0 * l.in * l.out * cfg.num_layers;
      double gflops = gpt.flops_per_step() / sec / 1e9;
      // a step faster than the peak: the peak was measured in a busy moment (train/peak.hpp: the peak stays
      // fixed, and MFU above 1 says it is wrong)
      if (gflops > peak && root)
        std::printf("# warning: %s B=%d T=%d ran at %.1f GFLOP/s, above the peak %.1f GFLOP/s measured in a busier "
                    "moment: MFU reads above 1, the peak is wrong\n", models[job.model].c_str(), B, T, gflops, peak);
      // measured memory: the highest peak resident set of the ranks' processes (the high-water mark of the
      // process so far: run one job per process to get one job's)
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      float rss_mib = static_cast<float>(usage.ru_maxrss) / 1024.0f;  // ru_maxrss is in KiB on Linux
      world->all_reduce(&rss_mib, 1, DType::kF32, comm::ReduceOp::kMax);
      if (root) {
        std::printf("%-10s %-9s %-4d %-5d %10.1f %10.0f %10.1f %7.3f %9.4f %9.0f %9.1f %9.4f (1/%d) %9.0f\n",
                    models[job.model].c_str(), shape.str().c_str(), B, T, sec * 1e3, static_cast<double>(B) * T / sec, gflops, gflops / peak,
                    loss, mib(rank_bytes), mib(tp), tp / tp_full, shape.gx * shape.gy * shape.gz, rss_mib);
        for (const auto& line : kernels::gemm_tuner().report_lines()) std::printf("  gemm-tuning %s\n", line.c_str());
        if (profile) {
          std::printf("  rank 0's time per op over %d steps:\n", steps);
          prof.print(stdout);
        }
      }
      if (job.last && root && (rounds > 1 || models.size() > 1))
        for (size_t mi = 0; mi < models.size(); mi++) {
          std::vector<double> v = seconds[mi];
          std::sort(v.begin(), v.end());
          const double median = v[v.size() / 2];
          std::printf("# %-10s B=%d T=%d over %d round(s): ms/step min %.1f median %.1f, MFU of the median %.3f, "
                      "of the min against the highest peak measured (%.1f GFLOP/s) %.3f\n",
                      models[mi].c_str(), B, T, rounds, v.front() * 1e3, median * 1e3, flops[mi] / median / 1e9 / peak,
                      best_peak, flops[mi] / v.front() / 1e9 / best_peak);
        }
      if (job.last) seconds.assign(models.size(), {});
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    comm::Runtime::abort(1);
  }
  return 0;
}
