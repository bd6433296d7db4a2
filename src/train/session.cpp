// train/session.cpp — building a run: grid, kernels and communicators, data, model, optimizer and
// its starting state (include/axonn/train/session.hpp).
#include "axonn/train/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <new>
#include <optional>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/memory_info.hpp"
#include "axonn/data/prepare.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/launch/memory_check.hpp"
#include "checkpointing.hpp"
#include "hooks.hpp"
#include "outputs.hpp"
#include "stop.hpp"
#include "resume.hpp"

namespace axonn::train {

namespace {

// The manifest key of the data's fingerprint (data::TokenCorpus::fingerprint).
constexpr const char* kDataFingerprintKey = "data_fingerprint";

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The memory this rank may take: what the node (or its control group) has left, shared by the ranks
// on the node. nullopt when unknown.
std::optional<double> memory_per_rank() {
  const std::optional<uint64_t> node = available_memory_bytes();
  if (!node) return std::nullopt;
  return static_cast<double>(*node) / std::max(1, comm::local_size());
}

// Refuses, before anything is allocated, what cannot fit: what every rank allocates (the model's parts,
// as model::Gpt::memory_need counts them for this rank's micro-batch, the AdamW moments and the batch's
// tokens), summed over the node's ranks, against the node's free memory; and a pool of reduce-scatter
// slots larger than a step can ever use. Collective over world.
void check_memory(const TrainConfig& c, const model::GptConfig& mc, const parallel::GridShape& g, int micro,
                  kernels::Backend backend, const model::GptRunOptions& run, comm::Communicator& world) {
  const int linears = 4 * mc.num_layers;  // a step's weight-gradient blocks: 4 per layer
  AXONN_CHECK_ARG(c.reduce_scatter_slots <= linears, "--reduce-scatter-slots ", c.reduce_scatter_slots,
                  " is more than the ", linears, " weight-gradient blocks a step of this model has in flight at most "
                  "(4 per layer); use at most ", linears);
  // the model's arenas are device memory with the CUDA kernels: not the host memory this check knows
  if (kernels::backend_device(backend) != Device::kCpu) return;
  const model::GptMemory m = model::Gpt::memory_need(mc, g, parallel::grid_coords(g, world.rank()), micro,
                                                     c.seq_len, backend, run);
  // AdamW's two moments mirror the fp32 parameters, as the gradients do; every rank holds the whole
  // batch's inputs and targets (Session::inputs_, targets_). (The synthetic corpus has its own check,
  // open_data's, with its own flag to name.)
  const uint64_t data = 2 * sizeof(int) * static_cast<uint64_t>(c.batch_size) * static_cast<uint64_t>(c.seq_len);
  const std::vector<launch::MemoryPart> parts = {{"params", m.params},           {"grads", m.grads},
                                         {"optimizer", 2 * m.grads},     {"activations", m.activations},
                                         {"comm buffers", m.comm_buffers}, {"data", data}};
  launch::check_node_memory(world, parts, "the model " + mc.str() + " with " + std::to_string(micro) + " sequence" +
                                      (micro > 1 ? "s" : "") + " of " + std::to_string(c.seq_len) +
                                      " tokens per micro-batch",
                    "use a smaller model, a smaller --batch-size or --micro-batch-size or --recompute (activations grow "
                    "with the micro-batch; --recompute keeps one block's), more model-parallel ranks (--grid: the state "
                    "is split over them), or fewer ranks per node");
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

model::GptConfig resolve_model(const TrainConfig& c, const detail::StartPlan& start) {
  if (start.model) return *start.model;
  // the base: a Hugging Face config.json (--model-config), else a preset (--model, default gpt2-tiny)
  const model::GptConfig base = c.model_config.empty()
                                    ? model::gpt_preset(c.model.empty() ? "gpt2-tiny" : c.model)
                                    : checkpoint::parse_hf_config_json(checkpoint::read_text_file(c.model_config),
                                                                       c.model_config);
  // the vocabulary: --vocab, else that of the tokenizer --data DIR was prepared with (its prepare.json)
  model::ShapeOverrides shape = shape_overrides(c);
  const std::optional<int> prepared = c.vocab ? std::nullopt : data::prepared_vocab_size(c.data);
  if (prepared) {
    shape.vocab = *prepared;
    log_info("model     vocabulary of %d ids from '%s/prepare.json' (the tokenizer the data was prepared with; "
             "--vocab overrides it)", *prepared, c.data.c_str());
  }
  return model::apply_shape(base, shape);
}

// --grid auto: the planner's best admissible grid for this model, batch and job size, predicted with
// a machine profile (--machine, else the calibrated `local`) for this implementation's step
// (docs/perf-model.md §10). Says which grid it chose and why.
parallel::GridShape auto_grid(const TrainConfig& c, const TrainChoices& choices, int world_size) {
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
  req.workload.model = {mc.str(), mc, 1};
  req.workload.seq_len = c.seq_len;
  req.workload.batch_size = c.batch_size;
  req.workload.positions = std::max(mc.max_seq_len, c.seq_len);
  req.gpus = world_size;
  req.settings = planner::settings_for(m, choices.overlap.any());  // as the run overlaps
  // the order too, unless --grid-order fixes it
  req.search_orders = !choices.grid_order;
  if (choices.grid_order) req.order = *choices.grid_order;
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
  const auto order_note = [&](const planner::GridShape& x) {
    return req.search_orders ? " order " + layout::grid_order_str(x.order) : std::string();
  };
  std::string runner_up;
  if (r.configs.size() > 1) {
    const auto& n = r.configs[1];
    char text[96];
    std::snprintf(text, sizeof text, "; next %d,%d,%d,%d%s at %.1f ms", n.grid.gx, n.grid.gy, n.grid.gz,
                  n.grid.gdata, order_note(n.grid).c_str(), n.total_s * 1e3);
    runner_up = text;
  }
  log_info("grid      auto: Gx=%d Gy=%d Gz=%d Gdata=%d%s, predicted %.1f ms/step (compute %.1f, communication "
           "%.1f) with machine profile '%s' (%s): fastest of %ld admissible grids%s%s",
           g.gx, g.gy, g.gz, g.gdata, order_note(g).c_str(), best.total_s * 1e3, best.compute_s * 1e3,
           best.exposed_comm_s * 1e3, m.name.c_str(), source.c_str(), r.admissible,
           req.search_orders ? " in every rank order" : "", runner_up.c_str());
  return g;  // the planner's grid is the trainer's (layout/grid.hpp)
}

// The grid --grid or --gx/--gy/--gz/--gdata give, checked against the job size.
parallel::GridShape explicit_grid(const TrainConfig& c, int world_size) {
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

parallel::GridShape resolve_grid(const TrainConfig& c, const TrainChoices& choices, int world_size) {
  if (c.grid == "auto") return auto_grid(c, choices, world_size);
  parallel::GridShape s = explicit_grid(c, world_size);
  if (choices.grid_order) s.order = *choices.grid_order;
  return s;
}

}  // namespace

Session::Session(const TrainConfig& config, std::shared_ptr<comm::Communicator> world)
    : c_(config), world_(std::move(world)) {
  validate_config(c_);
  // where the run starts; a resumed run takes the configuration its checkpoint records
  start_ = std::make_unique<detail::StartPlan>(detail::plan_start(c_));
  if (start_->resume_manifest) {
    c_ = detail::restore_config(c_, *start_->resume_manifest, start_->resume_dir, world_->size());
    validate_config(c_);
  }
  choices_ = parse_choices(c_);  // the choices' texts are not read again
  // the outputs, claimed before anything is written (outputs.hpp): refused on every rank alike
  outputs_ = std::make_unique<detail::RunOutputs>(c_, *start_, *world_);
  c_.trace = outputs_->trace();
  const TrainConfig& c = c_;
  shape_ = resolve_grid(c, choices_, world_->size());
  launch_ = launch::detect_launch(*world_);
  const kernels::Backend backend = choices_.backend;
  kernels::set_gemm_backend(choices_.gemm);
  kernels::set_gemm_tuning(choices_.gemm_tuning);
  kernels::gemm_tuner().clear();  // each run tunes afresh (and reports only its own choices)
  if (!c.gemm_tuning_report.empty()) {  // fail now, on every rank, rather than after training
    int32_t bad = 0;
    if (world_->rank() == 0) {  // a probe beside it: the file is written at the end, not emptied now
      try {
        detail::probe_writable(c.gemm_tuning_report + ".probe-" + std::to_string(::getpid()), "--gemm-tuning-report",
                               c.gemm_tuning_report);
      } catch (const IoError&) {
        bad = 1;
      }
    }
    world_->all_reduce(&bad, 1, DType::kI32, comm::ReduceOp::kMax);  // over world
    AXONN_CHECK_IO(!bad, "cannot write --gemm-tuning-report file '", c.gemm_tuning_report, "'");
  }
  const bool gpu = backend == kernels::Backend::kCuda;
  mc_ = resolve_model(c, *start_);
  AXONN_CHECK_ARG(c.seq_len <= mc_.max_seq_len, "--seq-len ", c.seq_len, " exceeds the model's max_seq_len ",
                  mc_.max_seq_len, "; use --seq-len <= ", mc_.max_seq_len);
  const int token_groups = shape_.gz * shape_.gdata;  // the batch is split over Z and data
  AXONN_CHECK_ARG(c.batch_size % token_groups == 0, "--batch-size ", c.batch_size, " is not divisible by Gz*Gdata = ",
                  shape_.gz, "*", shape_.gdata, " = ", token_groups, "; choose a multiple of ", token_groups);
  if (!c.save.empty()) detail::save_format(c.save, mc_.family);  // a format the model fits, before training
  B_local_ = c.batch_size / token_groups;
  validate_on_grid(c, shape_, B_local_);
  if (c.goldfish_k) goldfish_.emplace(goldfish_config(c));  // loads --goldfish-table on every rank
  micro_ = c.micro_batch_size ? c.micro_batch_size : B_local_;
  micro_batches_ = B_local_ / micro_;
  model::GptRunOptions run;
  run.overlap = choices_.overlap;
  run.recompute = c.recompute;
  run.cache_gathered_weights = c.cache_gathered_weights;
  run.reduce_scatter_slots = c.reduce_scatter_slots;
  run.lm_head_chunk = c.lm_head_chunk;
  // bf16: mixed precision (docs/precision.md): bf16 weight copies and activations, fp32 master weights,
  // gradients and optimizer state
  run.precision = choices_.precision;
  check_memory(c, mc_, shape_, micro_, backend, run, *world_);

  open_data();
  if (!c.data.empty()) data_fingerprint_ = corpus_->fingerprint();
  if (start_->resume_manifest) check_data_unchanged(*start_->resume_manifest);

  // where it computes (the GPU by node-local rank for cuda) and the communicator the grid splits
  compute_ = launch::setup_compute(backend, c.comm, world_);
  if (compute_.backend != kernels::Backend::kCuda) launch::fit_threads_to_cpus();

  // the grid, the model's shards on it, and the optimizer on those shards
  grid_ = std::make_unique<parallel::Grid>(shape_, compute_.grid_world);
  // The sharded checkpoints' collectives take host buffers: when the model's communicators take
  // device buffers (NCCL, MPI-staged), a second grid over the MPI world serves them.
  if (compute_.grid_world != world_) host_grid_ = std::make_unique<parallel::Grid>(shape_, world_);
  try {
    gpt_ = std::make_unique<model::Gpt>(mc_, *grid_, micro_, c.seq_len, backend, run);
    opt_ = std::make_unique<optim::AdamW>(gpt_->params(), optim::AdamWConfig{c.beta1, c.beta2, c.eps, c.weight_decay},
                                          gpt_->decay_mask(c.decay_all), kernels::ops_for(backend));
  } catch (const std::bad_alloc&) {  // what check_memory could not foresee (memory taken since, fragmentation)
    throw InvalidArgument(::axonn::detail::concat(
        "out of memory building the model ", mc_.str(), " with ", B_local_, " sequences of ", c.seq_len,
        " tokens per rank: use a smaller --batch-size or --micro-batch-size, --recompute, a grid with more "
        "model-parallel ranks (--grid), or a smaller model"));
  }
  // weights (random, --init) or, resuming, the checkpoint's whole state
  first_step_ = detail::start_state(*start_, c, mc_, host_grid(), *gpt_, *opt_, *loader_);
  gpt_->weights_updated();  // the shards were written directly: no gathered block of before is valid
  guard_ = StepGuard(c.skip_loss_z, c.skip_grad_z);
  if (start_->resume_manifest) restore_guard(*start_->resume_manifest);

  // MFU's denominator (train/peak.hpp): given, the local profile's, or measured now on every rank at once
  peak_ = resolve_mfu_peak(c.peak_gflops, run.precision == DType::kBF16, gpu, *world_);
  log_setup();

  // this rank's sequences of each global batch: block d*Gz + z, cut into its micro-batches
  const int64_t local_tokens = static_cast<int64_t>(B_local_) * c.seq_len;
  block_offset_ = (static_cast<int64_t>(grid_->coords().d) * shape_.gz + grid_->coords().z) * local_tokens;
  inputs_.resize(static_cast<size_t>(tokens_per_step()));
  targets_.resize(inputs_.size());
}

Session::~Session() = default;

void Session::raise_deferred_error() {
  std::exception_ptr e = std::move(deferred_);
  deferred_ = nullptr;
  checkpoint::agree_on_errors(*world_, e);
}

std::map<std::string, std::string> Session::manifest_record() const {
  std::map<std::string, std::string> r = {{"skipped_steps", std::to_string(skipped_steps_)},
                                          {"guard_losses", guard_.losses().to_text()},
                                          {"guard_norms", guard_.norms().to_text()}};
  if (!data_fingerprint_.empty()) r[kDataFingerprintKey] = data_fingerprint_;
  return r;
}

void Session::check_data_unchanged(const checkpoint::Manifest& m) const {
  auto it = m.extra.find(kDataFingerprintKey);
  if (it == m.extra.end() || data_fingerprint_.empty()) return;  // an older checkpoint, or the built-in corpus
  // another --data path than the recorded one was refused or allowed by restore_config already
  auto path = m.extra.find("data");
  if (path != m.extra.end() && path->second != detail::run_settings(c_).at("data")) return;
  const std::string diff = data::fingerprint_difference(it->second, data_fingerprint_);
  if (diff.empty()) return;
  AXONN_CHECK_ARG(c_.allow_data_change, "the data changed since checkpoint '", start_->resume_dir, "' was written: ",
                  diff, ". Resuming would continue at the recorded position in other tokens. Restore the data, or "
                  "add --allow-data-change to continue on it as it is now");
  log_warn("resume    the data changed since the checkpoint (%s): --allow-data-change, so the run continues on it",
           diff.c_str());
}

void Session::restore_guard(const checkpoint::Manifest& m) {
  const std::string& dir = start_->resume_dir;
  skipped_steps_ = detail::recorded_int(m, "skipped_steps", 0, m.step, dir, 0);
  const std::pair<const char*, OutlierDetector*> windows[] = {{"guard_losses", &guard_.losses()},
                                                                {"guard_norms", &guard_.norms()}};
  for (const auto& [key, window] : windows) {
    auto it = m.extra.find(key);
    if (it == m.extra.end()) continue;
    try {
      window->from_text(it->second);
    } catch (const std::invalid_argument& e) {
      throw IoError(::axonn::detail::concat("checkpoint '", dir, "' records ", key, " = '", it->second, "': ", e.what(),
                                            "; the manifest is corrupt or was edited"));
    }
  }
}

void Session::open_data() {
  const TrainConfig& c = c_;
  // the shards --data names (a file, a glob, a directory's training shards), or the synthetic corpus
  if (c.data.empty()) {
    const double bytes = 4.0 * static_cast<double>(c.synthetic_tokens);
    const std::optional<double> room = memory_per_rank();
    AXONN_CHECK_ARG(!room || bytes <= *room / 2, "--synthetic-tokens ", c.synthetic_tokens, " needs ", launch::format_bytes(bytes),
                    " of memory on every rank, more than half the ", room ? launch::format_bytes(*room) : "?",
                    " free per rank: use a smaller --synthetic-tokens, or --data FILE");
  }
  corpus_ = c.data.empty() ? std::make_unique<data::TokenCorpus>(std::make_unique<data::TokenShard>(
                                 data::synthetic_markov_tokens(mc_.vocab_size, c.synthetic_tokens, c.seed)))
                           : std::make_unique<data::TokenCorpus>(data::find_shards(c.data), mc_.vocab_size);
  loader_ = std::make_unique<data::BatchLoader>(*corpus_, c.batch_size, c.seq_len,
                                                data::LoaderOptions{c.shuffle, c.data_seed});
  if (!c.val_data.empty()) {
    // a directory gives its validation shards (names with "val", as axonn prepare writes them)
    val_corpus_ = std::make_unique<data::TokenCorpus>(data::find_shards(c.val_data, data::ShardSplit::kVal),
                                                      mc_.vocab_size);
    val_loader_ = std::make_unique<data::BatchLoader>(*val_corpus_, c.batch_size, c.seq_len);
  }
}

float Session::lr(int step) const {
  return optim::learning_rate(choices_.lr_schedule, c_.lr, step, c_.warmup_steps, lr_horizon(c_), c_.min_lr_frac);
}

int64_t Session::tokens_per_step() const { return static_cast<int64_t>(c_.batch_size) * c_.seq_len; }

LocalBatch Session::local_part() {
  return {inputs_.data() + block_offset_, targets_.data() + block_offset_, micro_batches_,
          static_cast<int64_t>(micro_) * c_.seq_len};
}

LocalBatch Session::next_batch() {
  loader_->next(inputs_.data(), targets_.data());
  return local_part();
}

std::optional<float> Session::validate() {
  AXONN_CHECK(val_loader_ != nullptr, "validate() without --val-data");
  val_loader_->set_position(0);  // the same batches every time
  double sum = 0.0;
  for (int i = 0; i < c_.val_batches; i++) {
    int32_t stop = detail::stop_signal_received();
    world_->all_reduce(&stop, 1, DType::kI32, comm::ReduceOp::kMax);  // over world: every rank ends the pass here
    if (stop) {
      log_info("validate  stopped after %d of %d batches by %s: no val_loss for this step", i, c_.val_batches,
               detail::signal_name(stop).c_str());
      return std::nullopt;
    }
    val_loader_->next(inputs_.data(), targets_.data());
    sum += evaluate(*gpt_, local_part());
  }
  return static_cast<float>(sum / c_.val_batches);
}

void Session::log_setup() const {
  const TrainConfig& c = c_;
  const model::Gpt& gpt = *gpt_;
  const kernels::Backend backend = compute_.backend;
  const bool gpu = backend == kernels::Backend::kCuda;
  const bool bf16 = gpt.precision() == DType::kBF16;
  const detail::StartPlan& start = *start_;
  const int world_size = world_->size();
  log_info("model     %s, %.2fM parameters, %s", mc_.str().c_str(), static_cast<double>(mc_.num_parameters()) / 1e6,
           !start.resume_dir.empty() ? ("resumed from " + start.resume_dir).c_str()
           : c.init.empty()        ? ("random init (seed " + std::to_string(c.seed) + ")").c_str()
                                   : c.init.c_str());
  log_info("data      %s, %lld tokens%s", c.data.empty() ? "synthetic Markov chain (built in)" : corpus_->describe().c_str(),
           static_cast<long long>(corpus_->num_tokens()), c.shuffle ? ", shuffled" : "");
  if (val_corpus_)
    log_info("validate  %s, %lld tokens: the first %d batch%s, %s", val_corpus_->describe().c_str(),
             static_cast<long long>(val_corpus_->num_tokens()), c.val_batches, c.val_batches > 1 ? "es" : "",
             c.val_every > 0 ? ("every " + std::to_string(c.val_every) + " steps and at the end").c_str()
                             : "after the last step");
  log_info("batch     B=%d sequences x T=%d tokens, %d steps", c.batch_size, c.seq_len, c.steps);
  log_info("optimizer AdamW lr=%g (%s, warmup %d) betas=%g,%g eps=%g wd=%g (%s) clip=%g", c.lr,
           c.lr_schedule.c_str(), c.warmup_steps, c.beta1, c.beta2, c.eps, c.weight_decay,
           c.decay_all ? "all tensors" : "matrices only", c.grad_clip);
  if (c.warmup_steps > c.steps)  // a run that ends in its warmup never trains at the rate it was given
    log_warn("--warmup-steps %d is more than the run's %d steps: the learning rate stays in its warmup and rises "
             "only to %.3g of --lr %g; use fewer warmup steps, or more --steps", c.warmup_steps, c.steps,
             static_cast<double>(lr(c.steps - 1) / c.lr), static_cast<double>(c.lr));
  if (goldfish_) {
    const model::GoldfishConfig& g = goldfish_->config();
    const std::string how = g.strategy == model::GoldfishStrategy::kStatic
                                ? "every " + std::to_string(g.k) + "th position from " + std::to_string(g.start)
                                : "h=" + std::to_string(g.h) + (g.table.empty() ? "" : ", table " + g.table);
    log_info("loss      Goldfish k=%d, %s (%s): about 1/%d of the targets leave the loss", g.k,
             model::goldfish_strategy_name(g.strategy), how.c_str(), g.k);
  }
  log_info("grid      Gx=%d Gy=%d Gz=%d Gdata=%d on %d rank%s%s; %d sequence%s per rank%s", shape_.gx, shape_.gy,
           shape_.gz, shape_.gdata, world_size, world_size > 1 ? "s" : "",
           world_size > 1 ? (" (" + planner::grid_degrees(shape_.gx, shape_.gy, shape_.gz, shape_.gdata) + ")").c_str()
                          : "",
           B_local_,
           B_local_ > 1 ? "s" : "",
           shape_.order == parallel::kAxonnGridOrder ? ""
                                                     : ("; rank order " + parallel::grid_order_str(shape_.order)).c_str());
  log_info("launch    %s", launch_.str().c_str());
  if (launch_.nodes > 1)
    log_info("placement %s", parallel::grid_placement_str(shape_, launch_.node_of_rank).c_str());
  log_info("overlap   %s; %d micro-batch%s of %d sequence%s per rank%s%s",
           parallel::overlap_name(gpt.run_options().overlap).c_str(), micro_batches_, micro_batches_ > 1 ? "es" : "",
           micro_, micro_ > 1 ? "s" : "", c.recompute ? "; activation recompute" : "",
           c.cache_gathered_weights ? "; gathered weights cached" : "");
  log_info("memory    per rank: params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB, "
           "comm buffers %.1f MiB, total %.1f MiB",
           mib(gpt.param_bytes()), mib(gpt.grad_bytes()), mib(opt_->state_bytes()), mib(gpt.activation_bytes()),
           mib(gpt.comm_buffer_bytes()),
           mib(gpt.param_bytes() + gpt.grad_bytes() + opt_->state_bytes() + gpt.activation_bytes() +
               gpt.comm_buffer_bytes()));
  if (gpu)
    log_info("compute   kernels cuda on %s, comm %s, precision %s, peak %.1f TFLOP/s (%s)",
             compute_.device_name.c_str(), compute_.comm.c_str(), c.dtype.c_str(), peak_.gflops_per_rank / 1e3,
             peak_.source.c_str());
  else {
    const std::string bf16_gemm = bf16 ? kernels::gemm_bf16_kernel() : "";
    const std::string how = !bf16 ? ""
                            : backend == kernels::Backend::kCpu
                                ? " (matmuls: bf16 GEMM " + bf16_gemm + "; other ops widened to fp32)"
                                : " (fp32 kernels on widened inputs)";
    log_info("compute   kernels %s, GEMM %s, %d threads, precision %s%s, peak %.1f GFLOP/s (%s)",
             std::string(kernels::backend_name(backend)).c_str(),
             std::string(kernels::gemm_backend_name(kernels::gemm_backend())).c_str(), kernels::cpu_threads(),
             c.dtype.c_str(), how.c_str(), peak_.gflops_per_rank, peak_.source.c_str());
  }
  if (kernels::gemm_tuning())
    log_info("gemm      layout tuning on: the first call of each GEMM shape times its %zu variants (step 1 is "
             "slower); choices reported at the end", kernels::kGemmVariants.size());
}

}  // namespace axonn::train
