// tools/axonn/commands.hpp — how subcommands plug into the axonn binary.
//
// Each cmd_<name>.cpp defines add_<name>_command(app, action): it adds a CLI11 subcommand with its
// flags and, when that subcommand is parsed, stores in *action the function that runs it. main()
// parses, then runs the action inside the one top-level error handler. The action returns the exit
// code; library errors are exceptions.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <functional>
#include <string>

namespace axonn::tools {

using Action = std::function<int()>;

// A check for an unsigned 64-bit option (a seed): CLI11 reads "-1" as 2^64-1 and a number past 2^64-1 as
// 2^64-1, so a seed the user did not give would run silently.
inline std::string check_unsigned64(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (!text.empty() && ec == std::errc() && ptr == end) return {};
  return "must be a whole number from 0 to 18446744073709551615 (unsigned 64 bits), got " + text;
}

void add_train_command(CLI::App& app, Action* action);
void add_plan_command(CLI::App& app, Action* action);
void add_calibrate_command(CLI::App& app, Action* action);
void add_bench_command(CLI::App& app, Action* action);  // bench comm, bench overlap
void add_convert_command(CLI::App& app, Action* action);
void add_inspect_command(CLI::App& app, Action* action);
void add_trace_summary_command(CLI::App& app, Action* action);
void add_prepare_command(CLI::App& app, Action* action);    // text to token shards
void add_tokenizer_command(CLI::App& app, Action* action);  // tokenizer train, encode, decode, info
void add_report_command(CLI::App& app, Action* action);
void add_generate_command(CLI::App& app, Action* action);  // continue a prompt (KV cache)
void add_memorization_command(CLI::App& app, Action* action);  // greedy extraction of documents (memorisation)

}  // namespace axonn::tools
