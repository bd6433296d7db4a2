#include "axonn/planner/machine.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"
#include "builtin_profiles.hpp"

namespace axonn::planner {

using nlohmann::json;

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllReduce:
      return "all-reduce";
  }
  return "?";
}

CollectiveKind parse_collective_kind(std::string_view text) {
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce})
    if (text == to_string(k)) return k;
  throw InvalidArgument(
      detail::concat("unknown collective '", text, "'; use all-reduce, all-gather or reduce-scatter"));
}

std::string_view to_string(Implementation i) {
  return i == Implementation::kAxonnCpp ? "axonn-cpp" : "megatron-axonn";
}

Implementation parse_implementation(std::string_view text) {
  if (text == "megatron-axonn") return Implementation::kMegatronAxonn;
  if (text == "axonn-cpp") return Implementation::kAxonnCpp;
  throw InvalidArgument(detail::concat("unknown implementation '", text, "'; use megatron-axonn or axonn-cpp"));
}

bool MachineProfile::in_table(long ip, long size) const {
  return std::any_of(bandwidth_table.begin(), bandwidth_table.end(),
                     [&](const BandwidthRule& r) { return !r.op && r.matches(ip, size); });
}

namespace {

// Groups of `size` ranks spaced `ip` apart tile blocks of ip·size consecutive ranks; they stay
// inside a node only when those blocks tile the nodes.
double fallback_gbs(const MachineProfile& m, long ip, long size) {
  if (m.inside_node(ip, size)) return m.intra_node_gbs;
  return m.inter_node_gbs / static_cast<double>(std::min(ip, m.gpus_per_node));
}

}  // namespace

bool MachineProfile::inside_node(long ip, long size) const {
  const long span = ip * size;
  return span <= gpus_per_node && gpus_per_node % span == 0;
}

double MachineProfile::spread_bandwidth_gbs(bool inside, long per_node) const {
  if (inside) return intra_node_gbs;
  return inter_node_gbs * static_cast<double>(std::max(1L, per_node)) / static_cast<double>(gpus_per_node);
}

double MachineProfile::spread_latency_s(bool inside) const {
  return 1e-6 * (inside ? intra_node_latency_us : inter_node_latency_us).value_or(latency_us);
}

double MachineProfile::bandwidth_gbs(long ip, long size) const {
  AXONN_CHECK(ip >= 1 && size >= 2, "bandwidth asked for ip=", ip, " size=", size);
  for (const BandwidthRule& r : bandwidth_table)
    if (!r.op && r.matches(ip, size)) return r.gbs;
  return fallback_gbs(*this, ip, size);
}

const BandwidthRule* MachineProfile::find_rule(CollectiveKind k, long ip, long size, bool async) const {
  for (bool form : {async, false}) {
    for (const BandwidthRule& r : bandwidth_table)
      if (r.async == form && r.matches(k, ip, size)) return &r;
    if (!async) break;
  }
  return nullptr;
}

double MachineProfile::bandwidth_gbs(CollectiveKind k, long ip, long size, bool async) const {
  AXONN_CHECK(ip >= 1 && size >= 2, "bandwidth asked for ip=", ip, " size=", size);
  if (const BandwidthRule* r = find_rule(k, ip, size, async)) return r->gbs;
  return fallback_gbs(*this, ip, size);
}

std::optional<double> MachineProfile::measured_seconds(CollectiveKind k, long ip, long size, double bytes,
                                                       bool async) const {
  const BandwidthRule* r = find_rule(k, ip, size, async);
  if (!r || r->samples.empty()) return std::nullopt;
  const auto& s = r->samples;
  if (bytes <= s.front().first) return s.front().second;  // the latency floor
  for (size_t i = 1; i < s.size(); ++i)
    if (bytes <= s[i].first) {
      const double f = (bytes - s[i - 1].first) / (s[i].first - s[i - 1].first);
      return s[i - 1].second + f * (s[i].second - s[i - 1].second);
    }
  // beyond the largest size measured: the bandwidth term for the rest
  const double c = k == CollectiveKind::kAllReduce ? 2.0 : 1.0, p = static_cast<double>(size);
  return s.back().second + c * (p - 1) / p * (bytes - s.back().first) / (r->gbs * 1e9);
}

double MachineProfile::latency_s(CollectiveKind k, long ip, long size, bool async) const {
  const BandwidthRule* r = find_rule(k, ip, size, async);
  if (r && r->latency_us) return 1e-6 * *r->latency_us;
  return spread_latency_s(inside_node(ip, size));
}

namespace {

const char* kSchemaHint = " (profile schema: docs/perf-model.md)";

class Parser {
 public:
  explicit Parser(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(detail::concat("machine profile '", origin_, "': ", what, kSchemaHint));
  }
  const json& field(const json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object()) fail(detail::concat("'", path, "' must be an object"));
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) fail(detail::concat("missing field '", join(path, key), "'"));
    return *it;
  }
  double number(const json& obj, const char* key, const std::string& path, bool positive = true) const {
    const json& v = field(obj, key, path);
    if (!v.is_number()) fail(detail::concat("field '", join(path, key), "' must be a number"));
    double d = v.get<double>();
    if (positive ? !(d > 0) : !(d >= 0))
      fail(detail::concat("field '", join(path, key), "' must be ", positive ? "> 0" : ">= 0", ", got ", d));
    return d;
  }
  long integer(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_number_integer() || v.get<long>() < 1)
      fail(detail::concat("field '", join(path, key), "' must be a positive integer"));
    return v.get<long>();
  }
  std::string text(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_string()) fail(detail::concat("field '", join(path, key), "' must be a string"));
    return v.get<std::string>();
  }
  // "ip": 4  or  "ip": [4, null]  (closed range, null = unbounded)
  void range(const json& rule, const char* key, const std::string& path, long* lo, long* hi) const {
    const json& v = field(rule, key, path);
    auto bad = [&] {
      fail(detail::concat("field '", join(path, key), "' must be a positive integer or [min, max] (max may be null)"));
    };
    if (v.is_number_integer()) {
      *lo = *hi = v.get<long>();
    } else if (v.is_array() && v.size() == 2 && v[0].is_number_integer() &&
               (v[1].is_number_integer() || v[1].is_null())) {
      *lo = v[0].get<long>();
      *hi = v[1].is_null() ? BandwidthRule::kUnbounded : v[1].get<long>();
    } else {
      bad();
    }
    if (*lo < 1 || *hi < *lo) bad();
  }
  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

 private:
  std::string origin_;
};

std::string read_file(const std::filesystem::path& p) {
  require_regular_file(p.string(), "machine file");  // a named pipe would block the read
  std::ifstream in(p, std::ios::binary);
  AXONN_CHECK_ARG(in, "machine file '", p.string(), "' cannot be read; give an existing .json file or ",
                  "a profile name");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<std::filesystem::path> search_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("AXONN_PROFILE_PATH")) {
    std::string_view s(env);
    while (!s.empty()) {
      auto colon = s.find(':');
      auto part = s.substr(0, colon);
      if (!part.empty()) dirs.emplace_back(std::string(part));
      if (colon == std::string_view::npos) break;
      s.remove_prefix(colon + 1);
    }
  }
  if (auto user = user_profile_dir(); !user.empty()) dirs.emplace_back(user);
  return dirs;
}

}  // namespace

MachineProfile parse_machine_profile(std::string_view json_text, std::string_view origin) {
  Parser p(origin);
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond a double
    p.fail(detail::concat("not valid JSON: ", e.what()));
  }
  MachineProfile m;
  m.name = p.text(doc, "name", "");
  if (auto it = doc.find("description"); it != doc.end() && it->is_string()) m.description = *it;
  if (auto it = doc.find("sources"); it != doc.end()) {
    if (!it->is_array()) p.fail("field 'sources' must be an array of strings");
    for (const json& s : *it) {
      if (!s.is_string()) p.fail("field 'sources' must be an array of strings");
      m.sources.push_back(s.get<std::string>());
    }
  }
  m.gpus_per_node = p.integer(doc, "gpus_per_node", "");

  const json& gpu = p.field(doc, "gpu", "");
  if (auto it = gpu.find("name"); it != gpu.end() && it->is_string()) m.gpu_name = *it;
  m.memory_gib = p.number(gpu, "memory_gib", "gpu");
  m.peak_tflops = p.number(gpu, "peak_tflops", "gpu");
  m.gemm_efficiency = p.number(gpu, "gemm_efficiency", "gpu");
  if (m.gemm_efficiency > 1) p.fail("field 'gpu.gemm_efficiency' is a fraction of peak, in (0, 1]");
  m.hbm_gbs = p.number(gpu, "hbm_gbs", "gpu");
  if (gpu.contains("gemm_call_us")) m.gemm_call_us = p.number(gpu, "gemm_call_us", "gpu", false);
  if (doc.contains("implementation")) {
    const std::string impl = p.text(doc, "implementation", "");
    try {
      m.implementation = parse_implementation(impl);
    } catch (const InvalidArgument&) {
      p.fail(detail::concat("field 'implementation' must be \"megatron-axonn\" or \"axonn-cpp\", got '", impl, "'"));
    }
  }
  if (auto it = doc.find("calibration"); it != doc.end() && it->is_object() && it->contains("ranks")) {
    const json& cal = *it;
    m.calibrated_ranks = p.integer(cal, "ranks", "calibration");
    if (auto peak = cal.find("mfu_peak"); peak != cal.end()) {
      MachineProfile::CalibratedPeak& cp = m.calibrated_peak;
      cp.fp32_gflops = p.number(*peak, "fp32_gflops_per_rank", "calibration.mfu_peak");
      cp.bf16_gflops = p.number(*peak, "bf16_gflops_per_rank", "calibration.mfu_peak");
      cp.cpu = p.text(cal, "cpu", "calibration");
      cp.date = p.text(cal, "date", "calibration");
      cp.ranks_per_node = p.integer(cal, "ranks_per_node", "calibration");
      cp.threads_per_rank = p.integer(cal, "threads_per_rank", "calibration");
    }
  }

  const json& net = p.field(doc, "network", "");
  if (net.contains("latency_us")) m.latency_us = p.number(net, "latency_us", "network", false);
  if (net.contains("sync_us")) m.sync_us = p.number(net, "sync_us", "network", false);
  if (net.contains("intra_node_latency_us"))
    m.intra_node_latency_us = p.number(net, "intra_node_latency_us", "network", false);
  if (net.contains("inter_node_latency_us"))
    m.inter_node_latency_us = p.number(net, "inter_node_latency_us", "network", false);
  for (auto [key, field] : {std::pair{"intra_node_overlap", &m.intra_node_overlap},
                             std::pair{"inter_node_overlap", &m.inter_node_overlap}})
    if (net.contains(key)) {
      const double share = p.number(net, key, "network", false);
      if (share > 1.0) p.fail(detail::concat("field 'network.", key, "' is a share of a collective's time, 0 to 1; got ", share));
      *field = share;
    }
  m.intra_node_gbs = p.number(net, "intra_node_gbs", "network");
  m.inter_node_gbs = p.number(net, "inter_node_gbs", "network");
  if (auto it = net.find("bandwidth_gbs"); it != net.end()) {
    if (!it->is_array()) p.fail("field 'network.bandwidth_gbs' must be an array of rules");
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string path = detail::concat("network.bandwidth_gbs[", i, "]");
      BandwidthRule r;
      p.range((*it)[i], "ip", path, &r.ip_min, &r.ip_max);
      p.range((*it)[i], "size", path, &r.size_min, &r.size_max);
      r.gbs = p.number((*it)[i], "gbs", path);
      if ((*it)[i].contains("op")) {
        const std::string op = p.text((*it)[i], "op", path);
        try {
          r.op = parse_collective_kind(op);
        } catch (const InvalidArgument&) {
          p.fail(detail::concat("field '", path, ".op' must be \"all-reduce\", \"all-gather\" or \"reduce-scatter\", got '",
                                op, "'"));
        }
      }
      if ((*it)[i].contains("latency_us")) r.latency_us = p.number((*it)[i], "latency_us", path, false);
      if ((*it)[i].contains("async")) {
        const json& a = (*it)[i]["async"];
        if (!a.is_boolean()) p.fail(detail::concat("field '", path, ".async' must be true or false"));
        r.async = a.get<bool>();
        if (r.async && !r.op) p.fail(detail::concat("field '", path, ".async' needs an \"op\" in its rule"));
      }
      if ((*it)[i].contains("samples")) {
        const json& smp = (*it)[i]["samples"];
        const std::string spath = path + ".samples";
        if (!r.op) p.fail(detail::concat("field '", spath, "' needs an \"op\" in its rule"));
        if (!smp.is_array() || smp.empty()) p.fail(detail::concat("field '", spath, "' must be a non-empty array"));
        for (const json& pt : smp) {
          if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number() || !pt[1].is_number() ||
              !(pt[0].get<double>() > 0) || !(pt[1].get<double>() > 0))
            p.fail(detail::concat("field '", spath, "' must hold [bytes, seconds] pairs of positive numbers"));
          if (!r.samples.empty() && !(pt[0].get<double>() > r.samples.back().first))
            p.fail(detail::concat("field '", spath, "' must be sorted by bytes, ascending"));
          r.samples.emplace_back(pt[0].get<double>(), pt[1].get<double>());
        }
      }
      m.bandwidth_table.push_back(r);
    }
  }
  return m;
}

std::vector<std::string> builtin_machine_names() {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < builtin::kBuiltinProfileCount; ++i) names.emplace_back(builtin::kBuiltinProfiles[i].name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string_view builtin_machine_json(std::string_view name) {
  for (std::size_t i = 0; i < builtin::kBuiltinProfileCount; ++i)
    if (name == builtin::kBuiltinProfiles[i].name) return builtin::kBuiltinProfiles[i].json;
  std::ostringstream known;
  for (const auto& n : builtin_machine_names()) known << " " << n;
  throw InvalidArgument(detail::concat("unknown machine '", name, "'; built-in profiles:", known.str(),
                                       ", or give a profile file (path ending in .json)"));
}

std::string user_profile_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return std::string(xdg) + "/axonn/profiles";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.config/axonn/profiles";
  return {};
}

std::vector<std::string> machine_profile_dirs() {
  std::vector<std::string> out;
  for (const auto& d : search_dirs()) out.push_back(d.string());
  return out;
}

std::optional<std::string> find_machine_profile_file(const std::string& name) {
  for (const auto& dir : search_dirs()) {
    std::error_code ec;
    auto file = dir / (name + ".json");
    if (std::filesystem::is_regular_file(file, ec)) return file.string();
  }
  return std::nullopt;
}

MachineProfile load_machine_profile(const std::string& name_or_path) {
  AXONN_CHECK_ARG(!name_or_path.empty(), "--machine is empty; give a profile name (", builtin_machine_names().front(),
                  ", ...) or a .json file");
  const bool is_path =
      name_or_path.find('/') != std::string::npos || (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (is_path) return parse_machine_profile(read_file(name_or_path), name_or_path);
  if (auto file = find_machine_profile_file(name_or_path)) return parse_machine_profile(read_file(*file), *file);
  return parse_machine_profile(builtin_machine_json(name_or_path), name_or_path + " (built-in)");
}

}  // namespace axonn::planner
