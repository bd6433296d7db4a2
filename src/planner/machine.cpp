#include "axonn/planner/machine.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "axonn/core/error.hpp"
#include "builtin_profiles.hpp"

namespace axonn::planner {

using nlohmann::json;

bool MachineProfile::in_table(long ip, long size) const {
  return std::any_of(bandwidth_table.begin(), bandwidth_table.end(),
                     [&](const BandwidthRule& r) { return r.matches(ip, size); });
}

double MachineProfile::bandwidth_gbs(long ip, long size) const {
  AXONN_CHECK(ip >= 1 && size >= 2, "bandwidth asked for ip=", ip, " size=", size);
  for (const BandwidthRule& r : bandwidth_table)
    if (r.matches(ip, size)) return r.gbs;
  // Groups of `size` ranks spaced `ip` apart tile blocks of ip·size consecutive ranks; they stay
  // inside a node only when those blocks tile the nodes.
  const long span = ip * size;
  if (span <= gpus_per_node && gpus_per_node % span == 0) return intra_node_gbs;
  return inter_node_gbs / static_cast<double>(std::min(ip, gpus_per_node));
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
  } catch (const json::parse_error& e) {
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

  const json& net = p.field(doc, "network", "");
  if (net.contains("latency_us")) m.latency_us = p.number(net, "latency_us", "network", false);
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

MachineProfile load_machine_profile(const std::string& name_or_path) {
  AXONN_CHECK_ARG(!name_or_path.empty(), "--machine is empty; give a profile name (", builtin_machine_names().front(),
                  ", ...) or a .json file");
  const bool is_path =
      name_or_path.find('/') != std::string::npos || (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (is_path) return parse_machine_profile(read_file(name_or_path), name_or_path);
  for (const auto& dir : search_dirs()) {
    std::error_code ec;
    auto file = dir / (name_or_path + ".json");
    if (std::filesystem::is_regular_file(file, ec)) return parse_machine_profile(read_file(file), file.string());
  }
  return parse_machine_profile(builtin_machine_json(name_or_path), name_or_path + " (built-in)");
}

}  // namespace axonn::planner
