#include "checkpointing.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <cstdlib>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/data/prepare.hpp"
#include "axonn/text/tokenizer.hpp"
#include "resume.hpp"

namespace axonn::train::detail {

namespace {

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

bool shape_flags(const TrainConfig& c) {
  return !c.model.empty() || c.layers || c.heads || c.channels || c.vocab || c.max_seq_len;
}

}  // namespace

void validate_checkpoint_flags(const TrainConfig& c) {
  AXONN_CHECK_ARG(c.checkpoint_every >= 0, "--checkpoint-every must be >= 0 (0: only at the end), got ",
                  c.checkpoint_every);
  AXONN_CHECK_ARG(c.keep >= 0, "--keep must be >= 0 (0 keeps every checkpoint), got ", c.keep);
  AXONN_CHECK_ARG(!c.checkpoint_dir.empty() || (c.checkpoint_every == 0 && c.keep == 0 && !c.resume),
                  "--checkpoint-every, --keep and --resume need --checkpoint-dir DIR");
  AXONN_CHECK_ARG(!(c.resume && !c.resume_from.empty()),
                  "give either --resume (the latest checkpoint in --checkpoint-dir) or --resume-from DIR, not both");
  // a branch's checkpoints never go into the directory it branches from, which belongs to that run
  AXONN_CHECK_ARG(c.resume_from.empty() || !c.checkpoint_dir.empty(), "--resume-from '", c.resume_from,
                  "' starts a new run from that checkpoint: give it its own --checkpoint-dir NEW or --run-dir NEW "
                  "(outputs never come from the checkpoint). To continue the recorded run in its own directory: "
                  "--checkpoint-dir ROOT --resume");
}

StartPlan plan_start(const TrainConfig& c) {
  StartPlan s;
  if (!c.init.empty()) {
    s.init = checkpoint::find_model_source(c.init);
    s.model = s.init->config;
  }
  if (c.resume) {
    if (auto latest = checkpoint::find_latest(c.checkpoint_dir)) {
      s.resume_dir = *latest;
    } else {
      log_info("resume    no checkpoint in '%s' yet: starting from step 0", c.checkpoint_dir.c_str());
    }
  } else if (!c.resume_from.empty()) {
    s.resume_dir = checkpoint::resolve_checkpoint(c.resume_from);
  }
  if (!s.resume_dir.empty()) {
    s.resume_manifest = checkpoint::read_manifest(s.resume_dir);
    // the checkpoint's model, unless --init or the shape flags name one (which must then match it)
    if (!s.model && !shape_flags(c)) s.model = s.resume_manifest->model;
  }
  return s;
}

int64_t count_nonfinite(const Arena& a) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); i++) {
    const Tensor t = a.tensor(i);
    const float* x = t.f32();
    for (int64_t j = 0; j < t.numel(); j++) bad += std::isfinite(x[j]) ? 0 : 1;
  }
  return bad;
}

namespace {

// Host copies of the state a checkpoint holds, for a model in device memory: the checkpoint code
// reads and writes host arenas (and its collectives take host buffers).
struct HostState {
  Arena params, m, v;
  HostState(const model::Gpt& gpt, const optim::AdamW& opt, bool with_moments)
      : params(gpt.params().clone_layout("parameters (host copy)", Device::kCpu)),
        m(opt.m().clone_layout("adamw m (host copy)", Device::kCpu)),
        v(opt.v().clone_layout("adamw v (host copy)", Device::kCpu)) {
    params.allocate();
    if (with_moments) {
      m.allocate();
      v.allocate();
    }
  }
};

}  // namespace

int start_state(const StartPlan& plan, const TrainConfig& c, const model::GptConfig& mc, const parallel::Grid& grid,
                model::Gpt& gpt, optim::AdamW& opt, data::BatchLoader& loader) {
  if (!plan.resume_dir.empty()) {
    const checkpoint::Manifest& m = *plan.resume_manifest;
    // the loader's position is the count of sequences consumed: any count is a valid place to resume
    AXONN_CHECK_IO(m.loader.position >= 0, "checkpoint '", plan.resume_dir, "' records loader position ",
                   m.loader.position);
    checkpoint::LoadResult r;
    if (gpt.device() == Device::kCpu) {
      r = checkpoint::load_sharded(plan.resume_dir, grid, mc, gpt.params(), &opt.m(), &opt.v());
    } else {
      HostState h(gpt, opt, true);
      r = checkpoint::load_sharded(plan.resume_dir, grid, mc, h.params, &h.m, &h.v);
      gpt.params().copy_from(h.params);  // upload
      opt.m().copy_from(h.m);
      opt.v().copy_from(h.v);
    }
    const checkpoint::Manifest& got = r.manifest;
    // AdamW's t: the optimizer steps taken (fewer than the steps when some were skipped)
    opt.set_steps(static_cast<int>(recorded_int(got, "adam_steps", 0, got.step, r.dir, got.step)));
    loader.set_position(got.loader.position);
    log_info("resume    %s: step %lld, %lld tokens seen, written on grid %s%s; %.1f MiB read by rank 0 in %.2f s",
             r.dir.c_str(), static_cast<long long>(got.step), static_cast<long long>(got.tokens_seen),
             got.grid.str().c_str(), r.resharded ? " (resharded to this grid)" : "", mib(r.bytes_read), r.seconds);
    if (!c.init.empty())
      log_warn("resume    --init %s is not used: the run continues from the checkpoint's weights (--init sets the "
               "weights of a run that starts at step 0)", c.init.c_str());
    if (got.step >= c.steps)
      log_info("resume    the checkpoint is at step %lld and --steps is %d: nothing left to train",
               static_cast<long long>(got.step), c.steps);
    return static_cast<int>(got.step);
  }
  if (plan.init)
    log_info("init      %s, fresh optimizer", checkpoint::load_weights(*plan.init, grid, gpt).c_str());
  else
    gpt.init_random(c.seed);
  return 0;
}

Checkpointer::Checkpointer(const TrainConfig& c, const model::GptConfig& mc, const parallel::Grid& grid,
                           const StartPlan& plan)
    : c_(c), mc_(mc), grid_(grid) {
  if (plan.resume_manifest) {
    first_step_ = static_cast<int>(plan.resume_manifest->step);
    tokens_before_ = plan.resume_manifest->tokens_seen;
    resumed_from_ = plan.resume_dir;
    last_saved_ = first_step_;
  }
  std::string dir;
  if (const auto prepared = data::prepared_tokenizer(c.data)) {
    dir = *prepared;
  } else if (!plan.resume_dir.empty()) {
    dir = plan.resume_dir;
  } else if (plan.init && plan.init->kind != checkpoint::ModelSource::Kind::kGguf) {
    dir = checkpoint::carried_tokenizer_dir(*plan.init);
  } else if (plan.init) {
    try {
      if (plan.init->gguf->tokenizer_listing()) tokenizer_gguf_ = plan.init->gguf;
    } catch (const IoError& e) {  // the weights are still the model's: train on, carrying no tokenizer
      log_warn("the checkpoints carry no tokenizer: the one inside %s is not one axonn reads (%s)",
               plan.init->path.c_str(), e.what());
    }
  }
  if (!dir.empty() && !text::tokenizer_files_in(dir).empty()) tokenizer_dir_ = dir;
}

std::unique_ptr<text::Tokenizer> Checkpointer::tokenizer() const {
  if (!tokenizer_dir_.empty()) return text::load_tokenizer(tokenizer_dir_);
  if (tokenizer_gguf_) return tokenizer_gguf_->tokenizer();
  return nullptr;
}

const std::vector<std::pair<std::string, std::string>>& Checkpointer::tokenizer_files() const {
  if (!tokenizer_files_) {
    tokenizer_files_.emplace();
    if (!tokenizer_dir_.empty())
      for (const auto& [path, name] : text::tokenizer_files_in(tokenizer_dir_))
        tokenizer_files_->emplace_back(name, checkpoint::read_text_file(path));
    if (tokenizer_gguf_)
      if (const auto listing = tokenizer_gguf_->tokenizer_listing())
        tokenizer_files_->push_back(
            text::tokenizer_file_from_listing(*listing, "the tokenizer of " + tokenizer_gguf_->file().path()));
  }
  return *tokenizer_files_;
}

bool Checkpointer::due(int done) const {
  return !c_.checkpoint_dir.empty() && c_.checkpoint_every > 0 && done % c_.checkpoint_every == 0;
}

checkpoint::SaveResult Checkpointer::save(int done, const data::BatchLoader& loader, const model::Gpt& gpt,
                                          const optim::AdamW& opt, const std::map<std::string, std::string>& state) {
  checkpoint::Manifest m;
  m.model = mc_;
  m.step = done;
  m.tokens_seen = tokens_before_ + static_cast<int64_t>(done - first_step_) * c_.batch_size * c_.seq_len;
  m.loader.position = loader.position();
  m.rng.seed = c_.seed;  // initialisation and synthetic data are counter-based; training draws nothing
  m.extra = run_settings(c_);
  m.extra["adam_steps"] = std::to_string(opt.steps());
  for (const auto& [key, value] : state) m.extra[key] = value;
  if (!resumed_from_.empty()) m.extra["resumed_from"] = resumed_from_;
  // the state as host arenas (a model in device memory is downloaded first)
  std::optional<HostState> host;
  if (gpt.device() != Device::kCpu) {
    host.emplace(gpt, opt, true);
    host->params.copy_from(gpt.params());  // download
    host->m.copy_from(opt.m());
    host->v.copy_from(opt.v());
  }
  const Arena& params = host ? host->params : gpt.params();
  const Arena& adam_m = host ? host->m : opt.m();
  const Arena& adam_v = host ? host->v : opt.v();
  // never a non-finite value into a checkpoint: the previous one stays the latest
  int64_t bad[2] = {count_nonfinite(params), count_nonfinite(adam_m) + count_nonfinite(adam_v)};
  grid_.world().all_reduce(bad, 2, DType::kI64);  // over the world (host buffers): every rank refuses alike
  AXONN_CHECK_IO(bad[0] == 0 && bad[1] == 0, "the state after step ", done, " holds ", bad[0],
                 " non-finite weights and ", bad[1], " non-finite optimizer moments (Inf or NaN): the run diverged; "
                 "nothing was saved, the previous checkpoint stays the latest. Lower --lr or enable --grad-clip");
  const checkpoint::SaveResult r =
      checkpoint::save_sharded(c_.checkpoint_dir, m, grid_, params, &adam_m, &adam_v, c_.keep, tokenizer_files());
  const int files =
      grid_.shape().gx * grid_.shape().gy * grid_.shape().gz + static_cast<int>(tokenizer_files().size());
  log_info("checkpoint %s: %d file%s, %.1f MiB in %.2f s (%.0f MiB/s)", r.dir.c_str(), files, files > 1 ? "s" : "",
           mib(r.bytes), r.seconds, r.seconds > 0 ? mib(r.bytes) / r.seconds : 0.0);
  last_saved_ = done;
  return r;
}

}  // namespace axonn::train::detail
