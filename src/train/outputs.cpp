// train/outputs.cpp — claiming a run's outputs before it writes (outputs.hpp states the rule).
#include "outputs.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <vector>

#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/data/token_dataset.hpp"
#include "axonn/train/run_dir.hpp"
#include "hooks.hpp"

namespace axonn::train::detail {

namespace fs = std::filesystem;

namespace {

std::optional<struct stat> lstat_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

// The data directories the run reads (--data, --val-data naming a directory, as `axonn prepare` makes one):
// no output of the run goes into one, its checkpoint and run directories included (`prepare --overwrite`
// would take them with the data).
std::vector<NamedPath> data_directories(const TrainConfig& c) {
  std::vector<NamedPath> dirs;
  std::error_code ec;
  for (const NamedPath& d : {NamedPath{"--data", c.data}, NamedPath{"--val-data", c.val_data}})
    if (!d.path.empty() && fs::is_directory(d.path, ec)) dirs.push_back(d);
  return dirs;
}

// What the run reads. Shards that cannot be found are left to the session to report.
std::vector<NamedPath> inputs_of(const TrainConfig& c, const StartPlan& start) {
  std::vector<NamedPath> in;
  const auto shards = [&](const char* flag, const std::string& spec, data::ShardSplit split) {
    if (spec.empty()) return;
    try {
      for (const std::string& s : data::find_shards(spec, split)) in.push_back({flag, s});
    } catch (const Error&) {
    }
  };
  shards("--data", c.data, data::ShardSplit::kTrain);
  shards("--val-data", c.val_data, data::ShardSplit::kVal);
  for (const NamedPath& d : data_directories(c)) in.push_back(d);
  if (!c.init.empty()) in.push_back({"--init", c.init});
  if (!c.goldfish_table.empty()) in.push_back({"--goldfish-table", c.goldfish_table});
  if (!start.resume_dir.empty()) in.push_back({c.resume ? "--resume" : "--resume-from", start.resume_dir});
  return in;
}

// The files the run writes (not its checkpoints' files, which live in the checkpoint directory).
std::vector<NamedPath> file_outputs(const TrainConfig& c) {
  std::vector<NamedPath> out;
  const auto add = [&](const char* flag, const std::string& path) {
    if (!path.empty()) out.push_back({flag, path});
  };
  add("--metrics", c.metrics);
  add("--trace", c.trace);
  add("--save", c.save);
  add("--gemm-tuning-report", c.gemm_tuning_report);
  return out;
}

// Refuses an output that is an input, lies inside an input directory, or is another output; and an
// output file that is a symbolic link.
void check_against_inputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); i++) {
    const NamedPath& o = outputs[i];
    const auto st = lstat_of(o.path);
    AXONN_CHECK_ARG(!st || !S_ISLNK(st->st_mode), o.quoted(), " is a symbolic link: axonn never writes through a "
                    "link (it could point at any file). Give the real path, or remove the link");
    check_output_apart(o, inputs);
    for (size_t j = 0; j < i; j++) {
      const NamedPath& other = outputs[j];
      AXONN_CHECK_ARG(!same_path(o.path, other.path), o.quoted(), " and ", other.quoted(),
                      " are the same file: give each output its own path");
    }
  }
}

// A Hugging Face model directory and a checkpoint directory are never one (checkpoint_dir.hpp,
// holds_checkpoints): --init would read the model's files in the checkpoints' place. Refused whatever
// --overwrite says, which removes checkpoints, never a model.
void check_model_and_checkpoints_apart(const TrainConfig& c) {
  if (!c.save.empty() && save_names_directory(c.save)) {
    const bool is_checkpoint_dir = !c.checkpoint_dir.empty() && same_path(c.save, c.checkpoint_dir);
    AXONN_CHECK_ARG(!is_checkpoint_dir && !checkpoint::holds_checkpoints(c.save), "--save '", c.save,
                    "' is a checkpoint directory", is_checkpoint_dir ? " (this run's --checkpoint-dir)" : "",
                    ": a Hugging Face model saved there would be read in the checkpoints' place by --init. Give "
                    "--save a directory of its own");
  }
  AXONN_CHECK_ARG(c.checkpoint_dir.empty() || !checkpoint::is_hf_model_dir(c.checkpoint_dir), "--checkpoint-dir '",
                  c.checkpoint_dir, "' holds a Hugging Face model (", checkpoint::kHfConfigName, " and its weights), "
                  "which --init would read in the place of this run's checkpoints. Give the checkpoints a directory "
                  "of their own");
}

bool non_empty_file(const std::string& path) {
  const auto st = lstat_of(path);
  return st && S_ISREG(st->st_mode) && st->st_size > 0;
}

// What a run directory holds of a run: its record, its metrics, its traces.
std::vector<std::string> run_record(const std::string& dir) {
  std::vector<std::string> found;
  const RunDir rd(dir);
  for (const char* name : {kConfigFile, kRunInfoFile, kMetricsFile, kTraceFile})
    if (non_empty_file(rd.path(name))) found.push_back(name);
  return found;
}

// The trace files of a run directory (trace*.json, as the report reads them).
std::vector<std::string> trace_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kTracePrefix, 0) == 0 && e.path().extension() == ".json" && e.is_regular_file(ec) &&
        !e.is_symlink(ec))
      found.push_back(e.path().string());
  }
  return found;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// "runs/a/trace.json" -> "runs/a/trace-from-step-11.json"
std::string trace_beside(const std::string& trace, int first_step) {
  const fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + "-from-step-" + std::to_string(first_step + 1) +
                             p.extension().string()))
      .string();
}

}  // namespace

void check_run_directories(const TrainConfig& c) {
  for (const NamedPath& dir : {NamedPath{"--run-dir", c.run_dir}, NamedPath{"--checkpoint-dir", c.checkpoint_dir}})
    if (!dir.path.empty()) check_output_apart(dir, data_directories(c));
  AXONN_CHECK_ARG(c.run_dir.empty() || same_path(c.run_dir, c.checkpoint_dir) ||
                      !checkpoint::holds_checkpoints(c.run_dir),
                  "--run-dir '", c.run_dir,
                  "' is a checkpoint directory (another run's --checkpoint-dir): a run directory keeps its checkpoints "
                  "in its own checkpoints/. Give --run-dir another directory, or continue that run with "
                  "--checkpoint-dir '", c.run_dir, "' --resume");
}

RunOutputs::RunOutputs(const TrainConfig& c, const StartPlan& start, comm::Communicator& world) : trace_(c.trace) {
  const int first_step = start.resume_manifest ? static_cast<int>(start.resume_manifest->step) : 0;
  // a run that resumes in place keeps the trace it wrote: its new window goes to a file beside it
  if (c.resume && first_step > 0 && !trace_.empty() && non_empty_file(trace_)) trace_ = trace_beside(trace_, first_step);
  std::exception_ptr error;
  if (world.rank() == 0) {
    try {
      TrainConfig claimed = c;
      claimed.trace = trace_;
      const std::vector<NamedPath> inputs = inputs_of(claimed, start);
      check_against_inputs(file_outputs(claimed), inputs);
      check_run_directories(c);
      check_model_and_checkpoints_apart(claimed);
      if (!c.run_dir.empty()) run_dir_lock_ = std::make_unique<checkpoint::DirectoryLock>(c.run_dir, "run directory",
                                                                                         "--run-dir");
      // another run's work: refused unless this run continues it (--resume) or --overwrite
      std::vector<std::string> others;
      const std::vector<NamedPath> files = file_outputs(claimed);
      if (!c.resume) {
        bool run_dir_taken = false;  // then its files are not listed again one by one
        if (!c.run_dir.empty()) {
          const std::vector<std::string> record = run_record(c.run_dir);
          run_dir_taken = !record.empty();
          if (run_dir_taken) others.push_back("--run-dir '" + c.run_dir + "' holds a run (" + joined(record) + ")");
        }
        const std::vector<int64_t> steps = checkpoint::list_checkpoints(c.checkpoint_dir);
        if (!c.checkpoint_dir.empty() && !steps.empty())
          others.push_back("--checkpoint-dir '" + c.checkpoint_dir + "' holds " + std::to_string(steps.size()) +
                           " checkpoint" + (steps.size() > 1 ? "s" : "") + " of a run (steps " +
                           std::to_string(steps.front()) + " to " + std::to_string(steps.back()) + ")");
        for (const NamedPath& f : files)
          if (non_empty_file(f.path) && !(run_dir_taken && path_inside(f.path, c.run_dir)))
            others.push_back(f.quoted() + " exists");
      }
      if (!others.empty()) {
        AXONN_CHECK_ARG(c.overwrite, joined(others), ": this run would replace what another run wrote. ",
                        c.resume_from.empty()
                            ? "Continue that run with --resume, give this run its own outputs, or add --overwrite "
                              "to replace them"
                            : "A run started with --resume-from is a new run beside the one it branches from: give "
                              "it its own --run-dir or --checkpoint-dir (and --save, --metrics), or add "
                              "--overwrite to replace them");
        for (const NamedPath& in : inputs)
          AXONN_CHECK_ARG(c.checkpoint_dir.empty() || (!same_file(in.path, c.checkpoint_dir) && !path_inside(in.path, c.checkpoint_dir)),
                          "--overwrite would delete the checkpoints of --checkpoint-dir '", c.checkpoint_dir,
                          "', and ", in.quoted(), " reads from there. Give this run another --checkpoint-dir");
      }
      if (!c.checkpoint_dir.empty()) checkpoint_lock_ = std::make_unique<checkpoint::DirectoryLock>(c.checkpoint_dir);
      if (!others.empty()) {  // --overwrite: another run's checkpoints, traces and samples go, nothing else
        const int removed = checkpoint::remove_all_checkpoints(c.checkpoint_dir);
        std::vector<std::string> traces = c.run_dir.empty() ? std::vector<std::string>{} : trace_files(c.run_dir);
        for (const std::string& t : traces) fs::remove(t);
        // the samples `axonn generate --run-dir` wrote of that run's model (a plain file only: no link followed)
        std::error_code ec;
        const std::string samples = c.run_dir.empty() ? "" : RunDir(c.run_dir).samples();
        const bool had_samples = !samples.empty() && fs::is_regular_file(fs::symlink_status(samples, ec));
        if (had_samples) fs::remove(samples, ec);
        log_warn("overwrite %s: replaced by this run (%d checkpoint%s and %zu trace file%s removed%s)",
                 joined(others).c_str(), removed, removed == 1 ? "" : "s", traces.size(), traces.size() == 1 ? "" : "s",
                 had_samples ? ", and its samples" : "");
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  checkpoint::agree_on_errors(world, error);
}

RunOutputs::~RunOutputs() = default;

}  // namespace axonn::train::detail
