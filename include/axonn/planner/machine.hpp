// planner/machine.hpp — machine profiles: what the cost model knows about a cluster.
//
// A profile is a JSON file (profiles/<name>.json in the source tree; schema in docs/perf-model.md):
// GPUs per node, the GPU's memory, peak rate and GEMM efficiency, and the collective bandwidth
// β(ip, group size) as AxoNN measured it — a first-match table of rules, plus a hierarchical
// fallback (one ring inside a node, or k rings sharing a node's NICs) for the positions the table
// does not list. The built-in profiles (perlmutter, frontier, alps) are compiled into the library,
// so `axonn plan --machine perlmutter` works from the build tree and from an install alike.
//
//   auto m = axonn::planner::load_machine_profile("perlmutter");     // or "my-cluster.json"
//   double gbs = m.bandwidth_gbs(/*ip=*/2, /*size=*/4);               // 40 GB/s
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::planner {

// One row of the bandwidth table: β for groups whose inner product ip (the product of the sizes of
// the grid axes that vary faster, spec §5.1) and size fall in the closed ranges given.
struct BandwidthRule {
  static constexpr long kUnbounded = std::numeric_limits<long>::max();
  long ip_min = 1, ip_max = kUnbounded;
  long size_min = 2, size_max = kUnbounded;
  double gbs = 0;  // bus bandwidth of one ring of this kind, GB/s

  bool matches(long ip, long size) const {
    return ip >= ip_min && ip <= ip_max && size >= size_min && size <= size_max;
  }
};

struct MachineProfile {
  std::string name;
  std::string description;
  std::vector<std::string> sources;  // where each number comes from
  long gpus_per_node = 1;

  std::string gpu_name;
  double memory_gib = 0;       // device memory per GPU (per GCD on MI250X)
  double peak_tflops = 0;      // dense bf16 peak per GPU
  double gemm_efficiency = 1;  // fraction of peak large GEMMs reach
  double hbm_gbs = 0;          // device memory bandwidth, for the memory-bound kernels

  double latency_us = 0;                       // α per ring step (0: no latency term)
  double intra_node_gbs = 0;                   // fallback: one ring inside a node
  double inter_node_gbs = 0;                   // fallback: one ring leaving a node; k such rings per node share it
  std::vector<BandwidthRule> bandwidth_table;  // first match wins

  // β(ip, size) in GB/s for a group of `size` ranks spaced `ip` apart (size >= 2). The first matching
  // table rule, else: if the groups tile nodes (ip·size divides gpus_per_node) intra_node_gbs, else
  // inter_node_gbs / min(ip, gpus_per_node) — the min(ip, gpus_per_node) rings that leave each node
  // share its NICs (spec §5.1; Megatron-AxoNN's later get_bw does the same).
  double bandwidth_gbs(long ip, long size) const;
  // True when the table, not the fallback, gives β(ip, size).
  bool in_table(long ip, long size) const;
};

// Parses a profile; `origin` names the file (or built-in) in error messages. Throws
// axonn::InvalidArgument naming the missing or bad field.
MachineProfile parse_machine_profile(std::string_view json_text, std::string_view origin);

// Loads a profile by file path (contains '/' or ends in ".json") or by name: <name>.json in each
// directory of $AXONN_PROFILE_PATH (':'-separated), then in user_profile_dir(), then the built-ins.
// Throws axonn::InvalidArgument when nothing matches (listing the known names) or the file is bad.
MachineProfile load_machine_profile(const std::string& name_or_path);

// Names of the profiles compiled into the library, sorted.
std::vector<std::string> builtin_machine_names();
// JSON text of a built-in profile; throws axonn::InvalidArgument for an unknown name.
std::string_view builtin_machine_json(std::string_view name);
// Where `axonn calibrate` writes the `local` profile: $XDG_CONFIG_HOME/axonn/profiles, or
// $HOME/.config/axonn/profiles; empty when neither variable is set.
std::string user_profile_dir();

}  // namespace axonn::planner
