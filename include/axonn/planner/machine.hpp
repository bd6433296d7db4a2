// planner/machine.hpp — machine profiles: what the cost model knows about a cluster.
//
// A profile is a JSON file (profiles/<name>.json in the source tree; schema in docs/perf-model.md):
// GPUs per node, the GPU's memory, peak rate and GEMM efficiency, and the collective bandwidth
// β(ip, group size) as AxoNN measured it — a first-match table of rules, plus a hierarchical
// fallback (one ring inside a node, or k rings sharing a node's NICs) for the positions the table
// does not list. A rule may be restricted to one collective and carry its own latency α: that is
// what `axonn calibrate` writes for the `local` profile (β and α fitted per collective, group size
// and position). The built-in profiles (perlmutter, frontier, alps) are compiled into the library,
// so `axonn plan --machine perlmutter` works from the build tree and from an install alike.
//
//   auto m = axonn::planner::load_machine_profile("perlmutter");     // or "my-cluster.json"
//   double gbs = m.bandwidth_gbs(/*ip=*/2, /*size=*/4);               // 40 GB/s
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace axonn::planner {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };
std::string_view to_string(CollectiveKind k);  // "all-gather", "reduce-scatter", "all-reduce"
// Throws axonn::InvalidArgument for anything but the three names above.
CollectiveKind parse_collective_kind(std::string_view text);

// Which software runs on the machine: it decides which collectives a step issues, in which
// precision, and whether they overlap (docs/perf-model.md §2 and §10).
enum class Implementation {
  kMegatronAxonn,  // AxoNN's GPU training (SC24): bf16, activation recompute, OAR/ORS/OAG overlap,
                   // Megatron-AxoNN's embedding / LM head; the built-in profiles
  kAxonnCpp,       // this project's CPU path (docs/parallelism.md): fp32, no recompute, weights
                   // re-gathered in backward, blocking collectives, exact LayerNorm over X
};
std::string_view to_string(Implementation i);  // "megatron-axonn", "axonn-cpp"
// Throws axonn::InvalidArgument for anything but the two names above.
Implementation parse_implementation(std::string_view text);

// One row of the bandwidth table: β for groups whose inner product ip (the product of the sizes of
// the grid axes that vary faster, spec §5.1) and size fall in the closed ranges given; optionally
// only for one collective, and with its own α.
struct BandwidthRule {
  static constexpr long kUnbounded = std::numeric_limits<long>::max();
  long ip_min = 1, ip_max = kUnbounded;
  long size_min = 2, size_max = kUnbounded;
  double gbs = 0;                     // bus bandwidth of one ring of this kind, GB/s
  std::optional<CollectiveKind> op;   // "op": only this collective; unset = every collective
  std::optional<double> latency_us;   // "latency_us": α per ring step; unset = network.latency_us
  // "samples": [[bytes, seconds], ...] — the measured time per call of this collective at this
  // position (`axonn calibrate`), by message size, ascending. When present (only with "op") the
  // cost model interpolates it instead of α + M/β; beyond the largest size it adds M/β.
  std::vector<std::pair<double, double>> samples;
  // "async": true — the collective issued non-blocking and waited (`*_async` + wait: how the trainer
  // issues all but its forward all-reduces and LayerNorm statistics), which MPI implements with other
  // algorithms than the blocking call (Open MPI: libnbc against coll/tuned). Such rules answer only
  // the lookups for that form; a lookup for it that finds none takes the blocking rules.
  bool async = false;

  bool matches(long ip, long size) const {
    return ip >= ip_min && ip <= ip_max && size >= size_min && size <= size_max;
  }
  bool matches(CollectiveKind k, long ip, long size) const { return (!op || *op == k) && matches(ip, size); }
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
  double gemm_call_us = 0;     // fixed cost per GEMM call (calibrated CPUs: small GEMMs are slower)
  double hbm_gbs = 0;          // device memory bandwidth, for the memory-bound kernels

  Implementation implementation = Implementation::kMegatronAxonn;  // "implementation"
  long calibrated_ranks = 0;  // "calibration.ranks": job size `axonn calibrate` measured (0: not calibrated)
  // "calibration.mfu_peak": the MFU peak per rank that `axonn calibrate` measured (GFLOP/s; 0: not
  // measured), and on what: a run takes it only on the same CPU with the same ranks per node and threads
  // per rank (train/peak.hpp).
  struct CalibratedPeak {
    double fp32_gflops = 0, bf16_gflops = 0;
    std::string cpu, date;
    long ranks_per_node = 0, threads_per_rank = 0;
  } calibrated_peak;

  double latency_us = 0;                       // α per ring step (0: no latency term)
  // Extra cost of one blocking collective inside a training step beyond what it costs in a tight loop
  // of collectives: ranks that compute between collectives drift apart, and on a machine with more
  // ranks than free cores the late one waits for a core (`axonn calibrate` measures it; 0: none).
  double sync_us = 0;
  double intra_node_gbs = 0;                   // fallback: one ring inside a node
  double inter_node_gbs = 0;                   // fallback: one ring leaving a node; k such rings per node share it
  // Fallback α per ring step inside a node and between nodes ("network.intra_node_latency_us",
  // "network.inter_node_latency_us"; unset: latency_us for both).
  std::optional<double> intra_node_latency_us, inter_node_latency_us;
  // The share of a non-blocking collective's time that computation running meanwhile covers, inside a
  // node and between nodes ("network.intra_node_overlap", "network.inter_node_overlap", 0-1; unset: 1,
  // a collective in flight costs the GEMMs nothing, as with a GPU's copy engines and NICs). On a CPU a
  // collective through shared memory is copying by the cores the GEMMs need; `axonn calibrate`
  // measures both and records them as calibration.overlap without applying them (docs/multi-host.md).
  std::optional<double> intra_node_overlap, inter_node_overlap;
  double overlap_share(bool inside) const { return (inside ? intra_node_overlap : inter_node_overlap).value_or(1.0); }
  std::vector<BandwidthRule> bandwidth_table;  // first match wins

  // β(ip, size) in GB/s for a group of `size` ranks spaced `ip` apart (size >= 2). The first matching
  // table rule, else: if the groups tile nodes (ip·size divides gpus_per_node) intra_node_gbs, else
  // inter_node_gbs / min(ip, gpus_per_node) — the min(ip, gpus_per_node) rings that leave each node
  // share its NICs (spec §5.1; Megatron-AxoNN's later get_bw does the same).
  // Rules restricted to one collective ("op") are skipped here.
  double bandwidth_gbs(long ip, long size) const;
  // β(ip, size) for collective `k`: the first rule that matches k (or has no "op"), else the fallback.
  // `async`: for the non-blocking form (BandwidthRule::async).
  double bandwidth_gbs(CollectiveKind k, long ip, long size, bool async = false) const;
  // α in seconds per ring step for collective `k`: the matching rule's latency_us, else the fallback
  // (network.intra_node_latency_us or inter_node_latency_us by where the ring runs, else latency_us).
  double latency_s(CollectiveKind k, long ip, long size, bool async = false) const;
  // True when groups of `size` ranks spaced `ip` apart lie inside nodes (ip·size divides gpus_per_node).
  bool inside_node(long ip, long size) const;
  // The fallback for a group that is not an (ip, size) ring (see CollectiveCost::ring): inside a node,
  // intra_node_gbs; across nodes with `per_node` of its ranks on each node, the gpus_per_node/per_node
  // groups with ranks on a node share its link: inter_node_gbs·per_node/gpus_per_node (for a ring,
  // per_node = gpus_per_node/min(ip, gpus_per_node): the rule above).
  double spread_bandwidth_gbs(bool inside, long per_node) const;
  double spread_latency_s(bool inside) const;
  // Time per call of collective `k` with message `bytes` at (ip, size), interpolated in the first
  // matching rule's samples; nullopt when that rule has none (or no rule matches).
  std::optional<double> measured_seconds(CollectiveKind k, long ip, long size, double bytes, bool async = false) const;
  // The first rule for collective `k` in its form at (ip, size): with `async`, the async rules first,
  // then the blocking ones; nullptr when none matches.
  const BandwidthRule* find_rule(CollectiveKind k, long ip, long size, bool async) const;
  // GEMM rate in FLOP/s the compute model uses: peak × efficiency.
  double gemm_flops_per_s() const { return peak_tflops * 1e12 * gemm_efficiency; }
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

// The directories a profile name is searched in, in order: $AXONN_PROFILE_PATH, then user_profile_dir().
std::vector<std::string> machine_profile_dirs();
// The file <name>.json in the first of machine_profile_dirs() that has one; nullopt if none does
// (built-ins are not files: `local` exists only once `axonn calibrate` has written it).
std::optional<std::string> find_machine_profile_file(const std::string& name);

// Names of the profiles compiled into the library, sorted.
std::vector<std::string> builtin_machine_names();
// JSON text of a built-in profile; throws axonn::InvalidArgument for an unknown name.
std::string_view builtin_machine_json(std::string_view name);
// Where `axonn calibrate` writes the `local` profile: $XDG_CONFIG_HOME/axonn/profiles, or
// $HOME/.config/axonn/profiles; empty when neither variable is set.
std::string user_profile_dir();

}  // namespace axonn::planner
