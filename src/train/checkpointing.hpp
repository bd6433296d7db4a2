// train/checkpointing.hpp (private to the train module) — where a run starts and when it saves.
//
// A run starts from random weights, an llm.c file, a Hugging Face checkpoint (GPT-2 or Llama: a
// safetensors file or a model directory), a GGUF file or a checkpoint's weights (--init), or continues a checkpoint with its optimizer, step and data
// position (--resume, --resume-from), on the same or another grid. With --checkpoint-dir it saves a
// sharded checkpoint every --checkpoint-every steps and at the end (checkpoint/sharded.hpp).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/data/token_dataset.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/text/tokenizer.hpp"
#include "axonn/train/config.hpp"
#include "axonn/checkpoint/model_source.hpp"

namespace axonn::train::detail {

// The checkpoint flags make sense together (InvalidArgument saying what to change).
void validate_checkpoint_flags(const TrainConfig& c);

// What the run starts from, decided before anything is built; the same on every rank (it reads only
// headers and manifests).
struct StartPlan {
  std::optional<checkpoint::ModelSource> init;           // --init (none: random weights)
  std::string resume_dir;                    // the step directory to continue; empty: start at step 0
  std::optional<checkpoint::Manifest> resume_manifest;
  std::optional<model::GptConfig> model;     // the model --init or the resumed checkpoint dictates
};
StartPlan plan_start(const TrainConfig& c);

// Collective over the grid. Sets the weights (and, when resuming, the AdamW state and the loader's
// position) and returns the first step to run. `grid` is the one the checkpoint's collectives use:
// its communicators take host buffers (on the GPU a grid over the MPI world, beside the model's);
// a model in device memory is loaded through host copies of its arenas. A bad checkpoint is refused on every rank before
// anything is changed.
int start_state(const StartPlan& plan, const TrainConfig& c, const model::GptConfig& mc, const parallel::Grid& grid,
                model::Gpt& gpt, optim::AdamW& opt, data::BatchLoader& loader);

// Elements of an fp32 host arena that are Inf or NaN.
int64_t count_nonfinite(const Arena& a);

class Checkpointer {
 public:
  // Counts steps and tokens on from the checkpoint the plan resumes (if any).
  Checkpointer(const TrainConfig& c, const model::GptConfig& mc, const parallel::Grid& grid, const StartPlan& plan);
  // Whether a checkpoint falls due after `done` steps (every --checkpoint-every steps).
  bool due(int done) const;
  // Saves the state after `done` steps; collective (a model in device memory is downloaded first).
  // `grid` (constructor) takes host buffers, as for start_state. Returns what was written.
  // `state`: more training state for the manifest's extra (the guard's).
  checkpoint::SaveResult save(int done, const data::BatchLoader& loader, const model::Gpt& gpt,
                              const optim::AdamW& opt, const std::map<std::string, std::string>& state);
  // The step of the last checkpoint saved or resumed from (-1: none).
  int last_saved() const { return last_saved_; }
  // The tokenizer the checkpoints carry (nullptr if none is known), and the files they carry it as,
  // {name, contents} (the names text::tokenizer_files gives, or tokenizer.json / tokenizer.model for one a GGUF
  // file held), for a Hugging Face --save too.
  std::unique_ptr<text::Tokenizer> tokenizer() const;
  const std::vector<std::pair<std::string, std::string>>& tokenizer_files() const;

 private:
  const TrainConfig& c_;
  model::GptConfig mc_;
  const parallel::Grid& grid_;
  int first_step_ = 0;
  int64_t tokens_before_ = 0;
  std::string resumed_from_;
  // the tokenizer each checkpoint carries: --data's (prepare copied it into DIR/tokenizer), else that of the
  // checkpoint the run resumes or starts from, else the --init model's (an HF directory's files, or the one
  // inside a GGUF file); none known: neither set
  std::string tokenizer_dir_;   // a directory of its files (text::tokenizer_files_in)
  std::shared_ptr<const checkpoint::GgufModel> tokenizer_gguf_;  // a GGUF file holding it (the --init source's)
  mutable std::optional<std::vector<std::pair<std::string, std::string>>> tokenizer_files_;  // read once
  int last_saved_ = -1;
};

}  // namespace axonn::train::detail
