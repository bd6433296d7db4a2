// train/config_file.hpp — every setting of `axonn train` once: its flag, its place in a TOML config
// file, its help, and the TrainConfig field it sets; the config file's reader and writer.
//
// The table below is what `axonn train` gives CLI11 (one flag per entry) and what the config file is read
// and written with, so a flag and its key cannot drift apart. A setting's key is its flag without the
// dashes in front (`--max-seq-len` is `max-seq-len`), in the table's section:
//
//   [optimizer]
//   lr = 0.0003
//   lr-schedule = "cosine"
//
//   train::TrainConfig c;
//   train::read_config_file(c, "run.toml");       // IoError / InvalidArgument naming the file and the key
//   std::fputs(train::config_toml(c).c_str(), stdout);   // reads back as the same config
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "axonn/train/config.hpp"

namespace axonn::train {

// The field of TrainConfig a setting holds. A bool is a flag (`--shuffle`, in a file `shuffle = true`).
using ConfigField = std::variant<std::string TrainConfig::*, bool TrainConfig::*, int TrainConfig::*,
                                 int64_t TrainConfig::*, uint64_t TrainConfig::*, float TrainConfig::*,
                                 double TrainConfig::*>;

// How a setting may differ when a run resumes from a checkpoint (train/resume.cpp, docs/resilience.md).
enum class OnResume {
  kNotRecorded,  // not in the checkpoint: the flag's value
  kSafe,         // recorded and restored unless given; a new value continues the same run (more steps,
                 // other kernels, another micro-batch size)
  kTrajectory,   // recorded and restored unless given; a new value makes another run: refused without
                 // --allow-config-change
  kOutput,       // recorded for information only, never restored: where the run writes (train/outputs.hpp)
};

struct ConfigOption {
  const char* section;  // "optimizer"
  const char* flag;     // "--lr"; the key in the file is the flag without its leading "--"
  ConfigField field;
  std::string help;     // `axonn train --help`
  OnResume on_resume = OnResume::kNotRecorded;
  bool path = false;    // a path: recorded absolute, so that a job restarted elsewhere finds it
  std::string key() const { return flag + 2; }
  // Its key in a checkpoint's manifest: the flag without "--", '-' as '_' ("lr_schedule").
  std::string record_key() const;
};

// The sections of a config file, in the order they are written.
const std::vector<const char*>& config_sections();
// Every setting, by section in config_sections()' order (the order of resume's messages too).
const std::vector<ConfigOption>& config_options();

// Sets the settings a TOML text holds into `c`; `source` names the text in errors (the file's path).
// Returns the flags of the settings whose value differs from TrainConfig's default (the ones the text
// really sets: a file that states a default is the same as one that leaves it out). Throws
// InvalidArgument naming the source, the line, the section and key and what to change, for a text
// that is not TOML, an unknown section or key, a value of the wrong type or out of range.
// Library entry point of the reader (also for fuzzing): any text, no file system.
std::set<std::string> read_config_toml(TrainConfig& c, std::string_view text, const std::string& source);
// The same for a file; IoError if it cannot be read.
std::set<std::string> read_config_file(TrainConfig& c, const std::string& path);

// The configuration of `axonn train [--config FILE] FLAGS`: FILE's settings (none when `file` is empty), then
// the fields of `flags` whose flag is in `given` (the command line's, which win); its `given` is both.
// Validated (validate_config, with the run directory's outputs): an error caused by a value from the
// file names the file, the section and the key.
TrainConfig effective_config(const std::string& file, const TrainConfig& flags, const std::set<std::string>& given);

// Every setting of `c` as a TOML text, by section, that read_config_toml reads back to `c`.
std::string config_toml(const TrainConfig& c);

}  // namespace axonn::train
