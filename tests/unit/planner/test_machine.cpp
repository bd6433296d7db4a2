// Machine profiles: the built-in tables reproduce AxoNN's get_bw (spec §5.3), the fallback model,
// parsing and error messages, lookup by name / file / search path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/planner/machine.hpp"

namespace ap = axonn::planner;

namespace {

// AxoNN's get_bw (Megatron-AxoNN gordon-bell-perlmutter examples/comm_model.py, spec §5.3),
// transcribed branch by branch; nullopt where it returns None.
std::optional<double> axonn_get_bw(long ip, long my, const std::string& machine) {
  if (machine == "perlmutter") {
    if (ip == 1) {
      if (my == 2) return 76;
      if (my == 4) return 225;
      if (my >= 8) return 80;
    } else if (ip == 2) {
      if (my == 2) return 76;
      if (my >= 4) return 40;
    } else if (ip >= 4) {
      return 20;
    }
  } else if (machine == "frontier") {
    if (ip == 1) {
      if (my == 2) return 129;
      if (my == 4) return 52;
      if (my == 8) return 135;
      return 80.0 / 2;
    } else if (ip == 2) {
      if (my == 2) return 50;
      if (my == 4) return 72;
      return 40.0 / 2;
    } else if (ip == 4) {
      if (my == 2) return 36;
      return 20.0 / 2;
    } else if (ip >= 8) {
      return 10.0 / 2;
    }
  }
  return std::nullopt;
}

std::string error_of(const std::string& json) {
  try {
    ap::parse_machine_profile(json, "test.json");
  } catch (const axonn::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

const char* kMinimal = R"({
  "name": "mini", "gpus_per_node": 4,
  "gpu": {"memory_gib": 16, "peak_tflops": 100, "gemm_efficiency": 0.5, "hbm_gbs": 900},
  "network": {"intra_node_gbs": 100, "inter_node_gbs": 20}
})";

}  // namespace

TEST(PlannerMachine, BuiltinsArePerlmutterFrontierAlps) {
  EXPECT_EQ(ap::builtin_machine_names(), (std::vector<std::string>{"alps", "frontier", "perlmutter"}));
  for (const auto& name : ap::builtin_machine_names()) {
    ap::MachineProfile m = ap::load_machine_profile(name);
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.sources.empty()) << name << " must say where its numbers come from";
    EXPECT_GT(m.peak_tflops, 0);
  }
}

// Every power-of-two position AxoNN's search can produce, up to 2^15 GPUs: same β as get_bw.
TEST(PlannerMachine, TablesReproduceAxonnGetBwForPowersOfTwo) {
  for (const std::string name : {"perlmutter", "frontier"}) {
    ap::MachineProfile m = ap::load_machine_profile(name);
    for (long ip = 1; ip <= (1L << 15); ip *= 2) {
      for (long my = 2; ip * my <= (1L << 15); my *= 2) {
        auto want = axonn_get_bw(ip, my, name);
        ASSERT_TRUE(want.has_value()) << name << " ip=" << ip << " my=" << my;
        EXPECT_TRUE(m.in_table(ip, my)) << name << " ip=" << ip << " my=" << my;
        EXPECT_DOUBLE_EQ(m.bandwidth_gbs(ip, my), *want) << name << " ip=" << ip << " my=" << my;
      }
    }
  }
}

// Where get_bw has a value for a non-power-of-two position, the table agrees; elsewhere the
// hierarchical fallback answers.
TEST(PlannerMachine, TablesAgreeWithGetBwWhereItIsDefined) {
  for (const std::string name : {"perlmutter", "frontier"}) {
    ap::MachineProfile m = ap::load_machine_profile(name);
    for (long ip = 1; ip <= 64; ++ip) {
      for (long my = 2; my <= 64; ++my) {
        auto want = axonn_get_bw(ip, my, name);
        EXPECT_EQ(m.in_table(ip, my), want.has_value()) << name << " ip=" << ip << " my=" << my;
        if (want) {
          EXPECT_DOUBLE_EQ(m.bandwidth_gbs(ip, my), *want) << name << " ip=" << ip << " my=" << my;
        }
      }
    }
  }
}

TEST(PlannerMachine, FallbackIsIntraNodeOrSharedNics) {
  ap::MachineProfile m = ap::parse_machine_profile(kMinimal, "mini");
  EXPECT_TRUE(m.bandwidth_table.empty());
  EXPECT_DOUBLE_EQ(m.latency_us, 0);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 2), 100);  // ranks {0,1}: inside a node
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 4), 100);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(2, 2), 100);  // {0,2}, {1,3}
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 3), 20);   // {3,4,5} crosses a node boundary: one ring per node
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 8), 20);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(2, 4), 10);  // two rings share each node's NICs
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(3, 2), 20.0 / 3);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(16, 2), 5);  // at most gpus_per_node rings per node
  // Perlmutter: fallback reproduces the table's inter-node entries (80 / min(ip, 4)).
  ap::MachineProfile p = ap::load_machine_profile("perlmutter");
  EXPECT_FALSE(p.in_table(3, 2));
  EXPECT_DOUBLE_EQ(p.bandwidth_gbs(3, 2), 80.0 / 3);
  EXPECT_DOUBLE_EQ(p.bandwidth_gbs(1, 3), 80);
}

TEST(PlannerMachine, AlpsIsDerivedFromPerlmutterTimesNvlinkRatio) {
  ap::MachineProfile a = ap::load_machine_profile("alps");
  EXPECT_EQ(a.gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(a.bandwidth_gbs(1, 2), 114);  // 76 × 1.5
  EXPECT_DOUBLE_EQ(a.bandwidth_gbs(1, 4), 338);  // 225 × 1.5, rounded
  EXPECT_DOUBLE_EQ(a.bandwidth_gbs(1, 8), 80);   // Slingshot-11 as Perlmutter
  EXPECT_DOUBLE_EQ(a.bandwidth_gbs(4, 16), 20);
  EXPECT_DOUBLE_EQ(a.peak_tflops, 989.4);
}

TEST(PlannerMachine, RangesAndUnboundedRules) {
  std::string json = kMinimal;
  json.replace(json.find("\"inter_node_gbs\": 20"), 20,
               R"("inter_node_gbs": 20, "latency_us": 5,
                  "bandwidth_gbs": [{"ip": [2, 3], "size": [4, null], "gbs": 7}, {"ip": 1, "size": 2, "gbs": 99}])");
  ap::MachineProfile m = ap::parse_machine_profile(json, "ranges");
  ASSERT_EQ(m.bandwidth_table.size(), 2u);
  EXPECT_EQ(m.bandwidth_table[0].ip_min, 2);
  EXPECT_EQ(m.bandwidth_table[0].ip_max, 3);
  EXPECT_EQ(m.bandwidth_table[0].size_max, ap::BandwidthRule::kUnbounded);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(3, 1000), 7);
  EXPECT_DOUBLE_EQ(m.bandwidth_gbs(1, 2), 99);
  EXPECT_DOUBLE_EQ(m.latency_us, 5);
}

TEST(PlannerMachine, MissingOrBadFieldsAreNamed) {
  auto without = [](const std::string& field) {
    std::string j = kMinimal;
    auto at = j.find(field);
    auto end = j.find_first_of(",}", at);
    if (j[end] == ',') {
      ++end;
    } else {
      at = j.rfind(',', at);  // last field of its object: drop the comma before it
    }
    j.erase(at, end - at);
    return j;
  };
  auto expect_error = [](const std::string& json, const std::string& needle) {
    std::string msg = error_of(json);
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: '" << msg << "' lacks '" << needle << "'";
    EXPECT_NE(msg.find("test.json"), std::string::npos) << msg;
  };
  expect_error(without("\"memory_gib\": 16"), "missing field 'gpu.memory_gib'");
  expect_error(without("\"gpus_per_node\": 4"), "missing field 'gpus_per_node'");
  expect_error(without("\"inter_node_gbs\": 20"), "missing field 'network.inter_node_gbs'");
  expect_error(without("\"name\": \"mini\""), "missing field 'name'");
  std::string bad = kMinimal;
  bad.replace(bad.find("0.5"), 3, "1.5");
  expect_error(bad, "gpu.gemm_efficiency");
  bad = kMinimal;
  bad.replace(bad.find("\"peak_tflops\": 100"), 18, "\"peak_tflops\": \"fast\"");
  expect_error(bad, "field 'gpu.peak_tflops' must be a number");
  bad = kMinimal;
  bad.replace(bad.find("\"inter_node_gbs\": 20"), 20,
              R"("inter_node_gbs": 20, "bandwidth_gbs": [{"ip": [4, 2], "size": 2, "gbs": 1}])");
  expect_error(bad, "network.bandwidth_gbs[0].ip");
  expect_error("{ not json", "not valid JSON");
  // A number beyond a double is nlohmann's out_of_range, not a parse_error (found by fuzz_machine_profile)
  expect_error("{\"name\": 2e122222}", "number overflow");
}

TEST(PlannerMachine, UnknownNameListsTheBuiltins) {
  try {
    ap::load_machine_profile("summit");
    FAIL() << "no error";
  } catch (const axonn::InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown machine 'summit'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("perlmutter"), std::string::npos) << msg;
  }
  EXPECT_THROW(ap::load_machine_profile("/nonexistent/dir/m.json"), axonn::InvalidArgument);
}

TEST(PlannerMachine, LoadsFilesAndSearchesTheProfilePath) {
  // The shipped file and the compiled-in copy are the same profile.
  ap::MachineProfile from_file = ap::load_machine_profile(std::string(AXONN_PROFILES_DIR) + "/frontier.json");
  ap::MachineProfile builtin = ap::load_machine_profile("frontier");
  EXPECT_EQ(from_file.name, builtin.name);
  EXPECT_EQ(from_file.bandwidth_table.size(), builtin.bandwidth_table.size());
  EXPECT_DOUBLE_EQ(from_file.inter_node_gbs, builtin.inter_node_gbs);

  // A <name>.json on $AXONN_PROFILE_PATH wins over the built-in of the same name.
  auto dir = std::filesystem::temp_directory_path() / "axonn_planner_test_profiles";
  std::filesystem::create_directories(dir);
  ::setenv("XDG_CONFIG_HOME", (dir / "xdg").c_str(), 1);  // no user profiles in the way
  std::string json = kMinimal;
  json.replace(json.find("\"mini\""), 6, "\"perlmutter\"");
  std::ofstream(dir / "perlmutter.json") << json;
  std::ofstream(dir / "mini.json") << kMinimal;
  ::setenv("AXONN_PROFILE_PATH", ("/nonexistent:" + dir.string()).c_str(), 1);
  EXPECT_DOUBLE_EQ(ap::load_machine_profile("perlmutter").memory_gib, 16);
  EXPECT_EQ(ap::load_machine_profile("mini").name, "mini");
  ::unsetenv("AXONN_PROFILE_PATH");
  EXPECT_DOUBLE_EQ(ap::load_machine_profile("perlmutter").memory_gib, 40);
  std::filesystem::remove_all(dir);
}
