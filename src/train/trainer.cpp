#include "axonn/train/trainer.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "axonn/checkpoint/llmc.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/data/token_dataset.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/train/compute.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/parallel/overlap.hpp"
#include "checkpointing.hpp"

namespace axonn::train {

namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void validate(const TrainConfig& c) {
  AXONN_CHECK_ARG(c.batch_size > 0, "--batch-size must be positive, got ", c.batch_size);
  AXONN_CHECK_ARG(c.seq_len > 0, "--seq-len must be positive, got ", c.seq_len);
  AXONN_CHECK_ARG(c.steps > 0, "--steps must be positive, got ", c.steps);
  AXONN_CHECK_ARG(c.lr >= 0 && std::isfinite(c.lr), "--lr must be a finite value >= 0, got ", c.lr);
  AXONN_CHECK_ARG(c.warmup_steps >= 0, "--warmup-steps must be >= 0, got ", c.warmup_steps);
  AXONN_CHECK_ARG(c.min_lr_frac >= 0 && c.min_lr_frac <= 1, "--min-lr-frac must be in [0, 1], got ", c.min_lr_frac);
  AXONN_CHECK_ARG(c.grad_clip >= 0, "--grad-clip must be >= 0 (0 = off), got ", c.grad_clip);
  AXONN_CHECK_ARG(c.layers >= 0 && c.heads >= 0 && c.channels >= 0 && c.vocab >= 0 && c.max_seq_len >= 0,
                  "--layers, --heads, --channels, --vocab and --max-seq-len must be positive");
  AXONN_CHECK_ARG(c.peak_gflops >= 0, "--peak-gflops must be >= 0 (0 = measure), got ", c.peak_gflops);
  AXONN_CHECK_ARG(c.gx >= 0 && c.gy >= 0 && c.gz >= 0 && c.gdata >= 0, "--gx, --gy, --gz and --gdata must be positive");
  AXONN_CHECK_ARG(c.grid.empty() || !(c.gx || c.gy || c.gz || c.gdata),
                  "give the grid either as --grid GX,GY,GZ,GD or as --gx --gy --gz --gdata, not both");
  bool overrides = c.layers || c.heads || c.channels || c.vocab || c.max_seq_len;
  AXONN_CHECK_ARG(c.init.empty() || (c.model.empty() && !overrides),
                  "--init takes the model's shape from the checkpoint; drop --model and the shape flags "
                  "(--layers --heads --channels --vocab --max-seq-len)");
  detail::validate_checkpoint_flags(c);
  (void)parallel::parse_overlap(c.overlap);
  AXONN_CHECK_ARG(c.micro_batch_size >= 0, "--micro-batch-size must be >= 0 (0 = all of a rank's sequences), got ",
                  c.micro_batch_size);
  AXONN_CHECK_ARG(c.reduce_scatter_slots >= 1, "--reduce-scatter-slots must be >= 1, got ", c.reduce_scatter_slots);
  AXONN_CHECK_ARG(c.trace_steps.empty() || !c.trace.empty(),
                  "--trace-steps chooses the steps written by --trace; give --trace FILE too");
  if (!c.trace.empty()) (void)parse_trace_steps(c.trace_steps, c.steps);
  const bool tuning = kernels::parse_gemm_tuning(c.gemm_tuning);
  AXONN_CHECK_ARG(c.gemm_tuning_report.empty() || tuning,
                  "--gemm-tuning-report writes the GEMM tuner's choices; add --gemm-tuning on");
}

// The GEMM tuner's choices (rank 0's) as JSON: one object per (engine, site, shape).
void write_gemm_tuning_report(const std::string& path) {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : kernels::gemm_tuner().records()) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const auto& cand : r.candidates)
      candidates.push_back(
          {{"variant", kernels::gemm_variant_name(cand.variant)}, {"layout", cand.layout}, {"ms", cand.seconds * 1e3}});
    records.push_back({{"engine", r.key.engine},
                       {"site", r.key.site},
                       {"m", r.key.m},
                       {"n", r.key.n},
                       {"k", r.key.k},
                       {"trans_a", r.key.trans_a},
                       {"trans_b", r.key.trans_b},
                       {"chosen", kernels::gemm_variant_name(r.chosen)},
                       {"speedup", r.speedup()},
                       {"candidates", candidates}});
  }
  std::ofstream f(path, std::ios::trunc);
  f << nlohmann::json({{"gemm_tuning", records}}).dump(1) << '\n';
  AXONN_CHECK_IO(f.good(), "cannot write --gemm-tuning-report file '", path, "'");
}

// Overlap, micro-batching and caching checks that need the grid.
void validate_on_grid(const TrainConfig& c, const parallel::GridShape& shape, int B_local) {
  AXONN_CHECK_ARG(c.micro_batch_size == 0 || B_local % c.micro_batch_size == 0, "--micro-batch-size ",
                  c.micro_batch_size, " does not divide the ", B_local, " sequences each rank gets (--batch-size ",
                  c.batch_size, " over Gz*Gdata = ", shape.gz * shape.gdata, "); choose a divisor of ", B_local);
  AXONN_CHECK_ARG(!c.cache_gathered_weights || shape.gz > 1,
                  "--cache-gathered-weights keeps the weights all-gathered over Z, but Gz = 1: nothing is gathered; "
                  "drop the flag or use a grid with Gz > 1");
}

// Rank 0 opens the trace file now, so that an unwritable path fails every rank at the start.
void check_trace_writable(const std::string& path, comm::Communicator& world) {
  int32_t bad = 0;
  if (world.rank() == 0) bad = std::ofstream(path, std::ios::trunc).good() ? 0 : 1;
  world.all_reduce(&bad, 1, DType::kI32, comm::ReduceOp::kMax);  // over world
  AXONN_CHECK_IO(!bad, "cannot write trace file '", path, "'");
}

// Every rank's trace events to rank 0, which writes one Chrome trace-event file: one process per
// rank (pid = world rank), its tracks as threads. Collective over world.
void write_trace(const std::string& path, const Trace& trace, const parallel::Grid& grid, const std::string& meta,
                 comm::Communicator& world) {
  // a common time origin: the earliest span of any rank
  const double mine = trace.earliest_us();
  int64_t neg_origin_ns = std::isfinite(mine) ? -static_cast<int64_t>(mine * 1e3) : INT64_MIN;
  world.all_reduce(&neg_origin_ns, 1, DType::kI64, comm::ReduceOp::kMax);  // over world
  const double origin_us = static_cast<double>(-neg_origin_ns) * 1e-3;
  const parallel::GridCoords& at = grid.coords();
  const std::string label = ::axonn::detail::concat("rank ", world.rank(), " (x,y,z,d)=(", at.x, ",", at.y, ",", at.z, ",", at.d, ")");
  std::string events = trace.chrome_events(world.rank(), label, origin_us);
  // gather the texts as 32-bit words
  events.resize((events.size() + 3) / 4 * 4, ' ');
  std::vector<int64_t> words(static_cast<size_t>(world.size()));
  const int64_t n = static_cast<int64_t>(events.size() / 4);
  world.all_gather(&n, words.data(), 1, DType::kI64);  // over world
  std::vector<size_t> counts(words.begin(), words.end());
  size_t total = 0;
  for (size_t w : counts) total += w;
  std::string all(total * 4, ' ');
  world.all_gather_v(events.data(), static_cast<size_t>(n), all.data(), counts, DType::kI32);  // over world
  if (world.rank() != 0) return;
  std::ofstream f(path, std::ios::trunc);
  f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << meta << ",\"traceEvents\":[\n";
  size_t at_word = 0;
  bool first = true;
  for (size_t r = 0; r < counts.size(); r++) {
    std::string part = all.substr(at_word * 4, counts[r] * 4);
    at_word += counts[r];
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (part.empty()) continue;
    f << (first ? "" : ",\n") << part;
    first = false;
  }
  f << "\n]}\n";
  AXONN_CHECK_IO(f.good(), "cannot write trace file '", path, "'");
}

model::GptConfig resolve_model(const TrainConfig& c, const detail::StartPlan& start) {
  if (start.model) return *start.model;
  model::GptConfig m = model::gpt_preset(c.model.empty() ? "gpt2-tiny" : c.model);
  if (c.layers) m.num_layers = c.layers;
  if (c.heads) m.num_heads = c.heads;
  if (c.channels) m.channels = c.channels;
  if (c.max_seq_len) m.max_seq_len = c.max_seq_len;
  if (c.vocab) {
    m.vocab_size = c.vocab;
    m.padded_vocab_size = model::pad_vocab(c.vocab);
  }
  m.validate();
  return m;
}

// --grid auto: the planner's best admissible grid for this model, batch and job size, predicted with
// a machine profile (--machine, else the calibrated `local`) for this implementation's step
// (docs/perf-model.md §10). Says which grid it chose and why.
parallel::GridShape auto_grid(const TrainConfig& c, int world_size) {
  // the model this run trains (train() plans its start again, and says what it found there)
  const LogLevel level = log_level();
  if (level > LogLevel::kWarn) set_log_level(LogLevel::kWarn);
  detail::StartPlan start;
  try {
    start = detail::plan_start(c);
  } catch (...) {
    set_log_level(level);
    throw;
  }
  set_log_level(level);
  const model::GptConfig mc = resolve_model(c, start);
  std::string source = c.machine;
  if (source.empty()) {
    auto file = planner::find_machine_profile_file("local");
    if (!file) {
      std::string dirs;
      for (const auto& d : planner::machine_profile_dirs()) dirs += (dirs.empty() ? "" : ", ") + d;
      throw InvalidArgument(axonn::detail::concat(
          "--grid auto needs a machine profile, and no calibrated profile 'local' exists (searched: ",
          dirs.empty() ? "nowhere: $HOME is not set" : dirs, "). Run `mpirun -np ", world_size,
          " axonn calibrate` once with the ranks and threads you train with, or pass --machine NAME|FILE "
          "(e.g. a profile written by axonn calibrate --out FILE)"));
    }
    source = *file;
  }
  planner::MachineProfile m = planner::load_machine_profile(source);
  m.implementation = planner::Implementation::kAxonnCpp;  // whatever hardware, this trainer's step
  planner::PlanRequest req;
  req.workload.model = {mc.str(), mc.num_layers, mc.channels, mc.num_heads, mc.padded_vocab_size, 1};
  req.workload.seq_len = c.seq_len;
  req.workload.batch_size = c.batch_size;
  req.workload.positions = std::max(mc.max_seq_len, c.seq_len);
  req.gpus = world_size;
  req.settings = planner::settings_for(m);
  req.unit = "ranks";
  req.advice = "Change the number of ranks (mpirun -np) or --batch-size, or give --grid GX,GY,GZ,GD";
  planner::PlanResult r;
  try {
    r = planner::plan(m, req);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("--grid auto: ") + e.what());
  }
  const planner::Estimate& best = r.configs.front();
  AXONN_CHECK_ARG(best.fits, "--grid auto: no grid of ", world_size, " ranks fits this model in ",
                  req.settings.memory_headroom * m.memory_gib, " GiB per rank (machine '", m.name,
                  "'); the best needs ", best.memory.total_gib(), " GiB. Use more ranks or a smaller --batch-size");
  if (m.calibrated_ranks > 0 && m.calibrated_ranks != world_size)
    log_warn("--grid auto: profile '%s' was calibrated with %ld ranks, this job has %d: positions it did not measure "
             "use its fallback bandwidths; run `mpirun -np %d axonn calibrate` for a matching profile",
             source.c_str(), m.calibrated_ranks, world_size, world_size);
  const auto& g = best.grid;
  char runner_up[96] = "";
  if (r.configs.size() > 1) {
    const auto& n = r.configs[1];
    std::snprintf(runner_up, sizeof runner_up, "; next %ld,%ld,%ld,%ld at %.1f ms", n.grid.gx, n.grid.gy, n.grid.gz,
                  n.grid.gdata, n.total_s * 1e3);
  }
  log_info("grid      auto: Gx=%ld Gy=%ld Gz=%ld Gdata=%ld, predicted %.1f ms/step (compute %.1f, communication "
           "%.1f) with machine profile '%s' (%s): fastest of %ld admissible grids%s",
           g.gx, g.gy, g.gz, g.gdata, best.total_s * 1e3, best.compute_s * 1e3, best.exposed_comm_s * 1e3,
           m.name.c_str(), source.c_str(), r.admissible, runner_up);
  return {static_cast<int>(g.gx), static_cast<int>(g.gy), static_cast<int>(g.gz), static_cast<int>(g.gdata)};
}

parallel::GridShape resolve_grid(const TrainConfig& c, int world_size) {
  if (c.grid == "auto") return auto_grid(c, world_size);
  if (c.gx || c.gy || c.gz || c.gdata) {
    parallel::GridShape s{c.gx ? c.gx : 1, c.gy ? c.gy : 1, c.gz ? c.gz : 1, 0};
    // an unset Gdata takes the ranks the other three leave
    s.gdata = c.gdata ? c.gdata : std::max(1, world_size / s.gx / s.gy / s.gz);
    parallel::check_grid(s, world_size);
    return s;
  }
  // the grid's size first: everything checked after it (the batch split, the model's divisibility)
  // would otherwise report the symptom of a grid that does not fit the job
  const parallel::GridShape s = parallel::parse_grid(c.grid, world_size);
  parallel::check_grid(s, world_size);
  return s;
}

}  // namespace

std::pair<int, int> parse_trace_steps(const std::string& text, int steps) {
  if (text.empty()) return steps == 1 ? std::pair{1, 1} : std::pair{2, std::min(4, steps)};
  int a = 0, b = 0;
  char extra = 0;
  const int got = std::sscanf(text.c_str(), "%d:%d%c", &a, &b, &extra);
  if (got == 1 && text.find(':') == std::string::npos) b = a;
  AXONN_CHECK_ARG((got == 2 || (got == 1 && b == a)) && a >= 1 && b >= a && b <= steps,
                  "--trace-steps wants A:B or A with 1 <= A <= B <= --steps (", steps, "), got '", text, "'");
  return {a, b};
}

std::vector<StepMetrics> train(const TrainConfig& c, std::shared_ptr<comm::Communicator> world) {
  validate(c);
  const parallel::GridShape shape = resolve_grid(c, world->size());
  const kernels::Backend backend = kernels::parse_backend(c.kernels);
  kernels::set_gemm_backend(kernels::parse_gemm_backend(c.gemm));
  kernels::set_gemm_tuning(kernels::parse_gemm_tuning(c.gemm_tuning));
  kernels::gemm_tuner().clear();  // each run tunes afresh (and reports only its own choices)
  if (!c.gemm_tuning_report.empty()) {  // fail now, on every rank, rather than after training
    int32_t bad = 0;
    if (world->rank() == 0) bad = std::ofstream(c.gemm_tuning_report, std::ios::trunc).good() ? 0 : 1;
    world->all_reduce(&bad, 1, DType::kI32, comm::ReduceOp::kMax);  // over world
    AXONN_CHECK_IO(!bad, "cannot write --gemm-tuning-report file '", c.gemm_tuning_report, "'");
  }
  const bool gpu = backend == kernels::Backend::kCuda;
  AXONN_CHECK_ARG(c.dtype == "fp32" || c.dtype == "bf16", "unknown --dtype '", c.dtype, "'; use fp32 or bf16");
  const optim::LrSchedule schedule = optim::parse_lr_schedule(c.lr_schedule);
  const detail::StartPlan start = detail::plan_start(c);
  const model::GptConfig mc = resolve_model(c, start);
  AXONN_CHECK_ARG(c.seq_len <= mc.max_seq_len, "--seq-len ", c.seq_len, " exceeds the model's max_seq_len ",
                  mc.max_seq_len, "; use --seq-len <= ", mc.max_seq_len);
  const int token_groups = shape.gz * shape.gdata;  // the batch is split over Z and data
  AXONN_CHECK_ARG(c.batch_size % token_groups == 0, "--batch-size ", c.batch_size, " is not divisible by Gz*Gdata = ",
                  shape.gz, "*", shape.gdata, " = ", token_groups, "; choose a multiple of ", token_groups);
  AXONN_CHECK_ARG(c.save.empty() || world->size() == 1,
                  "--save writes an llm.c file from one rank's full weights; with several ranks use "
                  "--checkpoint-dir DIR and `axonn convert --from DIR --to model.bin`");
  const int B_local = c.batch_size / token_groups;
  validate_on_grid(c, shape, B_local);
  const int micro = c.micro_batch_size ? c.micro_batch_size : B_local;
  const int micro_batches = B_local / micro;
  model::GptRunOptions run;
  run.overlap = parallel::parse_overlap(c.overlap);
  run.recompute = c.recompute;
  run.cache_gathered_weights = c.cache_gathered_weights;
  run.reduce_scatter_slots = c.reduce_scatter_slots;
  // bf16: mixed precision (docs/precision.md): bf16 weight copies and activations, fp32 master weights,
  // gradients and optimizer state
  run.precision = c.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  if (!c.trace.empty()) check_trace_writable(c.trace, *world);

  // data: the shards --data names (a file, a glob, a directory's training shards), or the synthetic corpus
  const data::TokenCorpus corpus =
      c.data.empty() ? data::TokenCorpus(std::make_unique<data::TokenShard>(
                           data::synthetic_markov_tokens(mc.vocab_size, c.synthetic_tokens, c.seed)))
                     : data::TokenCorpus(data::find_shards(c.data), mc.vocab_size);
  data::BatchLoader loader(corpus, c.batch_size, c.seq_len, {c.shuffle, c.data_seed});

  // where it computes (the GPU by node-local rank for cuda) and the communicator the grid splits
  const Compute compute = setup_compute(c.kernels, c.comm, world);

  // the grid, the model's shards on it, and the optimizer on those shards
  parallel::Grid grid(shape, compute.grid_world);
  // The sharded checkpoints' collectives take host buffers: when the model's communicators take
  // device buffers (NCCL, MPI-staged), a second grid over the MPI world serves them.
  std::unique_ptr<parallel::Grid> host_grid;
  if (compute.grid_world != world) host_grid = std::make_unique<parallel::Grid>(shape, world);
  const parallel::Grid& checkpoint_grid = host_grid ? *host_grid : grid;
  model::Gpt gpt(mc, grid, micro, c.seq_len, backend, run);
  std::vector<bool> decay(model::kNumParamTensors);
  for (int i = 0; i < model::kNumParamTensors; i++)
    decay[i] = c.decay_all || model::param_is_matrix(static_cast<model::Param>(i));
  optim::AdamW opt(gpt.params(), {c.beta1, c.beta2, c.eps, c.weight_decay}, decay, kernels::ops_for(backend));
  // weights (random, --init) or, resuming, the checkpoint's whole state; then saves as they fall due
  const int first_step = detail::start_state(start, c, mc, checkpoint_grid, gpt, opt, loader);
  gpt.weights_updated();  // the shards were written directly: no gathered block of before is valid
  detail::Checkpointer checkpointer(c, mc, checkpoint_grid, start);

  // MFU's denominator: given, or measured now (on the CPU the GEMM of the precision: sgemm, or the bf16 GEMM
  // in bf16; a bf16 GEMM on the GPU)
  const bool bf16 = run.precision == DType::kBF16;
  const double peak = c.peak_gflops > 0 ? c.peak_gflops
                      : gpu            ? 1e3 * measure_gpu_bf16_tflops(8192, 3)
                      : bf16           ? kernels::measure_bf16_gemm_gflops(1536, 3)
                                       : kernels::measure_sgemm_gflops(1536, 3);
  log_info("model     %s, %.2fM parameters, %s", mc.str().c_str(), static_cast<double>(mc.num_parameters()) / 1e6,
           !start.resume_dir.empty() ? ("resumed from " + start.resume_dir).c_str()
           : c.init.empty()        ? ("random init (seed " + std::to_string(c.seed) + ")").c_str()
                                   : c.init.c_str());
  log_info("data      %s, %lld tokens%s", c.data.empty() ? "synthetic Markov chain (built in)" : corpus.describe().c_str(),
           static_cast<long long>(corpus.num_tokens()), c.shuffle ? ", shuffled" : "");
  log_info("batch     B=%d sequences x T=%d tokens, %d steps", c.batch_size, c.seq_len, c.steps);
  log_info("optimizer AdamW lr=%g (%s, warmup %d) betas=%g,%g eps=%g wd=%g (%s) clip=%g", c.lr,
           c.lr_schedule.c_str(), c.warmup_steps, c.beta1, c.beta2, c.eps, c.weight_decay,
           c.decay_all ? "all tensors" : "matrices only", c.grad_clip);
  log_info("grid      Gx=%d Gy=%d Gz=%d Gdata=%d on %d rank%s; %d sequence%s per rank", shape.gx, shape.gy, shape.gz,
           shape.gdata, world->size(), world->size() > 1 ? "s" : "", B_local, B_local > 1 ? "s" : "");
  log_info("overlap   %s; %d micro-batch%s of %d sequence%s per rank%s%s", parallel::overlap_name(run.overlap).c_str(),
           micro_batches, micro_batches > 1 ? "es" : "", micro, micro > 1 ? "s" : "",
           c.recompute ? "; activation recompute" : "", c.cache_gathered_weights ? "; gathered weights cached" : "");
  log_info("memory    per rank: params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB, "
           "comm buffers %.1f MiB, total %.1f MiB",
           mib(gpt.param_bytes()), mib(gpt.grad_bytes()), mib(opt.state_bytes()), mib(gpt.activation_bytes()),
           mib(gpt.comm_buffer_bytes()),
           mib(gpt.param_bytes() + gpt.grad_bytes() + opt.state_bytes() + gpt.activation_bytes() +
               gpt.comm_buffer_bytes()));
  if (gpu)
    log_info("compute   kernels cuda on %s, comm %s, precision %s, peak %.1f TFLOP/s (%s)",
             compute.device_name.c_str(), compute.comm.c_str(), c.dtype.c_str(), peak / 1e3,
             c.peak_gflops > 0 ? "given" : "dense bf16 GEMM measured now");
  else {
    const std::string bf16_gemm = bf16 ? kernels::gemm_bf16_kernel() : "";
    const std::string how = !bf16 ? ""
                            : backend == kernels::Backend::kCpu
                                ? " (matmuls: bf16 GEMM " + bf16_gemm + "; other ops widened to fp32)"
                                : " (fp32 kernels on widened inputs)";
    const std::string source = c.peak_gflops > 0 ? "given"
                               : bf16            ? "bf16 GEMM " + bf16_gemm + " measured now"
                                                 : "sgemm measured now";
    log_info("compute   kernels %s, GEMM %s, %d threads, precision %s%s, peak %.1f GFLOP/s (%s)",
             std::string(kernels::backend_name(backend)).c_str(),
             std::string(kernels::gemm_backend_name(kernels::gemm_backend())).c_str(), kernels::cpu_threads(),
             c.dtype.c_str(), how.c_str(), peak, source.c_str());
  }
  if (kernels::gemm_tuning())
    log_info("gemm      layout tuning on: the first call of each GEMM shape times its %zu variants (step 1 is "
             "slower); choices reported at the end", kernels::kGemmVariants.size());

  std::optional<std::ofstream> metrics;
  if (!c.metrics.empty() && world->rank() == 0) {
    metrics.emplace(c.metrics, first_step > 0 ? std::ios::app : std::ios::trunc);  // a resumed run appends
    AXONN_CHECK_IO(metrics->good(), "cannot write metrics file '", c.metrics, "'");
  }

  // the timeline trace: recorded during the window's steps, written once after its last
  Trace trace;
  const std::pair<int, int> window = c.trace.empty() ? std::pair{0, -1} : parse_trace_steps(c.trace_steps, c.steps);
  if (!c.trace.empty()) gpt.set_trace(&trace);
  if (!c.trace.empty() && window.second <= first_step)
    log_warn("--trace-steps %d:%d lie before the resumed step %d: no trace is written", window.first, window.second,
             first_step + 1);

  const int64_t tokens_per_step = static_cast<int64_t>(c.batch_size) * c.seq_len;
  const int64_t local_tokens = static_cast<int64_t>(B_local) * c.seq_len;
  const int64_t micro_tokens = static_cast<int64_t>(micro) * c.seq_len;
  // this rank's sequences of each global batch: block d*Gz + z, cut into its micro-batches
  const int64_t block_offset = (static_cast<int64_t>(grid.coords().d) * shape.gz + grid.coords().z) * local_tokens;
  std::vector<int> inputs(static_cast<size_t>(tokens_per_step)), targets(inputs.size());
  std::vector<StepMetrics> history;
  for (int step = first_step; step < c.steps; step++) {
    trace.set_step(step + 1);
    trace.set_recording(step + 1 >= window.first && step + 1 <= window.second);
    Timer timer;
    float loss = 0.0f;
    double norm = 0.0;
    float lr = optim::learning_rate(schedule, c.lr, step, c.warmup_steps, c.steps, c.min_lr_frac);
    {
      TraceScope step_span(&trace, "step", SpanKind::kGroup);
      loader.next(inputs.data(), targets.data());
      // gradient accumulation: each micro-batch's loss is the mean over its global tokens, so the
      // step's loss and gradient (scaled by 1/M) are those of the mean over the whole batch; the
      // gradient sums run once, after the last micro-batch
      gpt.zero_grad();
      double loss_sum = 0.0;
      for (int k = 0; k < micro_batches; k++) {
        const int64_t at = block_offset + k * micro_tokens;
        float lk = gpt.forward(inputs.data() + at, targets.data() + at);
        AXONN_CHECK(std::isfinite(lk), "the loss is ", lk, " at step ", step,
                    "; training diverged: lower --lr or enable --grad-clip");
        gpt.backward({1.0 / micro_batches, k == micro_batches - 1});
        loss_sum += lk;
      }
      loss = static_cast<float>(loss_sum / micro_batches);
      gpt.sync_gradients();
      norm = gpt.grad_norm();
      TraceScope opt_span(&trace, "adamw_step");
      opt.step(gpt.params(), gpt.grads(), lr, optim::clip_scale(norm, c.grad_clip));
      gpt.memory().synchronize();  // the GPU's queued update belongs to this step's time
    }
    double seconds = timer.seconds();
    trace.set_recording(false);
    if (step + 1 == window.second) {
      const std::string meta = nlohmann::json({{"grid", shape.str()},
                                               {"overlap", parallel::overlap_name(run.overlap)},
                                               {"micro_batch_size", micro},
                                               {"micro_batches", micro_batches},
                                               {"recompute", c.recompute},
                                               {"cache_gathered_weights", c.cache_gathered_weights},
                                               {"steps", {window.first, window.second}}})
                                   .dump();
      write_trace(c.trace, trace, grid, meta, *world);
      trace.clear();
      log_info("trace     steps %d-%d written to %s", window.first, window.second, c.trace.c_str());
    }

    StepMetrics m;
    m.step = step;
    m.loss = loss;
    m.lr = lr;
    m.grad_norm = norm;
    m.step_ms = seconds * 1e3;
    m.tokens_per_s = static_cast<double>(tokens_per_step) / seconds;
    m.mfu = gpt.flops_per_step() * micro_batches / seconds / (peak * 1e9 * world->size());
    history.push_back(m);
    if (!c.quiet)
      log_info("step %5d/%d | loss %.6f | lr %.2e | norm %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%%", step + 1,
               c.steps, loss, lr, norm, m.step_ms, m.tokens_per_s, 100.0 * m.mfu);
    if (metrics) {
      nlohmann::json j = {{"step", m.step},       {"loss", m.loss},         {"lr", m.lr},
                          {"grad_norm", m.grad_norm}, {"step_ms", m.step_ms}, {"tokens_per_s", m.tokens_per_s},
                          {"mfu", m.mfu}};
      *metrics << j.dump() << '\n';
      metrics->flush();
    }
    checkpointer.after_step(step + 1, loader, gpt, opt);
  }
  if (!c.save.empty()) {
    if (gpt.device() != Device::kCpu) {
      Arena host = gpt.params().clone_layout("parameters (host copy)", Device::kCpu);
      host.allocate();
      host.copy_from(gpt.params());  // download
      checkpoint::save_llmc(c.save, mc, host);
    } else {
      checkpoint::save_llmc(c.save, mc, gpt.params());
    }
    log_info("saved     %s", c.save.c_str());
  }
  if (kernels::gemm_tuning()) {  // rank 0's choices (every rank tunes its own shapes)
    for (const auto& line : kernels::gemm_tuner().report_lines()) log_info("gemm-tuning %s", line.c_str());
    if (!c.gemm_tuning_report.empty() && world->rank() == 0) {
      write_gemm_tuning_report(c.gemm_tuning_report);
      log_info("gemm-tuning report written to %s", c.gemm_tuning_report.c_str());
    }
  }
  return history;
}

}  // namespace axonn::train
