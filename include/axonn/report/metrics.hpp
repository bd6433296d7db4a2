// report/metrics.hpp — reading the metrics JSON Lines a run writes (axonn train --metrics).
//
// One JSON object per line. The keys the report reads (any other key is ignored, so the trainer can
// add more):
//   step           integer, 0-based (required on every line)
//   loss           the step's training loss                    val_loss   a validation loss
//   lr             learning rate                               grad_norm  gradient norm before clipping
//   step_ms        step time                                   tokens_per_s, mfu (0..1)
//   tokens         tokens trained so far, this step included; if absent, summed from tokens_per_s·step_ms
//   memory_bytes   per-rank memory: an array, one number per rank (or one number for rank 0)
//   loss_all_tokens, loss_dropped_tokens, goldfish_dropped_fraction   under the Goldfish loss (docs/goldfish.md):
//                  the loss over every target and over the dropped ones, and the dropped share (loss is the
//                  kept targets')
// A value may be null (nlohmann::json writes NaN and infinity as null): it is read as NaN. A line that
// has only some keys (a validation line with step and val_loss) is fine; the others are absent.
// Blank lines are skipped.
//
//   auto records = report::read_metrics_file("run/metrics.jsonl");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::report {

struct MetricsRecord {
  int line = 0;          // 1-based line number in the file
  int64_t step = 0;      // 0-based
  // nullopt when the line lacks the key; NaN when its value is null
  std::optional<double> loss, val_loss, lr, grad_norm, step_ms, tokens_per_s, mfu, tokens;
  std::optional<double> loss_all_tokens, loss_dropped_tokens, dropped_fraction;  // the Goldfish loss's
  std::vector<double> memory_bytes;  // per rank; empty when absent
};

// Parses the text of a metrics file; `name` (the file's path) goes into the messages. Throws
// InvalidArgument naming the file and line for a line that is not a JSON object, lacks an integer
// "step", or has a known key with a value that is not a number (or null); and for a text without a
// single record ("... is empty").
std::vector<MetricsRecord> parse_metrics(std::string_view text, const std::string& name);
// The same from a file; IoError if it cannot be read.
std::vector<MetricsRecord> read_metrics_file(const std::string& path);

// Tokens trained through each record: its "tokens" where given, otherwise the running sum of
// tokens_per_s * step_ms / 1000 (the step's tokens); NaN where neither is known.
std::vector<double> cumulative_tokens(const std::vector<MetricsRecord>& records);

}  // namespace axonn::report
