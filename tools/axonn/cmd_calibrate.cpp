// axonn calibrate — measure this allocation and write the `local` machine profile.
//
//   mpirun -np 4 axonn calibrate [--out FILE] [--quick] [--gemm onednn|openblas]
//
// The measuring is the library's (bench/calibrate.hpp); this command checks where the profile goes
// before anything is measured and writes it whole or not at all. Default output:
// ~/.config/axonn/profiles/local.json (planner::user_profile_dir()), where `axonn plan --machine
// local` and `axonn train --grid auto` find it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "axonn/measure/calibrate.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/planner/calibration.hpp"
#include "commands.hpp"

namespace axonn::tools {
namespace {

using comm::Communicator;

struct CalibrateOptions {
  std::string out;
  bool quick = false;
  std::string gemm = "onednn";
};

int run_calibrate(const CalibrateOptions& o) {
  auto world = comm::world();
  Communicator& w = *world;
  const bool root = w.rank() == 0;
  kernels::set_gemm_backend(kernels::parse_gemm_backend(o.gemm));

  // Where the profile goes; checked (and its folder created) before anything is measured.
  std::string out = o.out;
  if (out.empty()) {
    const std::string dir = planner::user_profile_dir();
    AXONN_CHECK_ARG(!dir.empty(), "neither $XDG_CONFIG_HOME nor $HOME is set: give --out FILE");
    out = dir + "/local.json";
  }
  check_output_file({"--out", out});
  int ok = 1;
  std::string why;
  if (root) {
    std::error_code ec;
    const auto parent = std::filesystem::path(out).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    ok = 0;
    if (!ec) {
      std::ofstream probe(out + ".tmp", std::ios::trunc);
      ok = probe ? 1 : 0;
    }
    std::error_code ignored;
    std::filesystem::remove(out + ".tmp", ignored);
    if (!ok)
      why = "cannot write the profile to '" + out + "'" + (ec ? " (" + ec.message() + ")" : "") +
            "; give --out FILE in a writable folder";
  }
  w.broadcast(&ok, 1, DType::kI32, 0);  // over world
  if (!ok) throw IoError(root ? why : "the profile cannot be written (see rank 0)");

  const planner::Calibration c = measure::calibrate(w, o.quick);

  if (root) {
    const std::string json = planner::calibration_profile_json(c);
    planner::parse_machine_profile(json, out);  // what we write, the planner reads
    // written whole or not at all: a temporary, renamed over the profile
    {
      std::ofstream f(out + ".tmp", std::ios::trunc);
      f << json;
      f.flush();
      ok = f.good() ? 1 : 0;
    }
    std::error_code ec;
    if (ok) std::filesystem::rename(out + ".tmp", out, ec);
    if (!ok || ec) {
      ok = 0;
      std::filesystem::remove(out + ".tmp", ec);
    }
  }
  w.broadcast(&ok, 1, DType::kI32, 0);  // over world
  if (!ok) throw IoError(root ? "cannot write the profile to '" + out + "'" : "the profile cannot be written (see rank 0)");
  if (root)
    std::printf("wrote %s (profile '%s'): axonn plan --machine %s ..., axonn train --grid auto\n", out.c_str(),
                c.name.c_str(), o.out.empty() ? "local" : out.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "measure this allocation (sgemm rate, memory bandwidth, collectives per group size and position) and write "
      "the machine profile `local` for axonn plan and axonn train --grid auto; run under mpirun with the ranks and "
      "threads you will train with");
  sub->footer("Example:\n  mpirun -np 2 axonn calibrate --quick    # then: axonn plan --machine local ...");
  sub->add_option("--out", o->out, "profile file to write (default: ~/.config/axonn/profiles/local.json, or "
                                   "$XDG_CONFIG_HOME/axonn/profiles/local.json)");
  sub->add_flag("--quick", o->quick, "fewer sizes and repetitions: a rough profile in seconds");
  sub->add_option("--gemm", o->gemm, "CPU GEMM backend to measure: onednn|openblas")->capture_default_str();
  sub->callback([action, o] { *action = [o] { return run_calibrate(*o); }; });
}

}  // namespace axonn::tools
