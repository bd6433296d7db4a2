// bench/plan_validate — does the planner rank this machine's grids right? (issue 6, validation)
//
// Under mpirun, for a small GPT, builds every admissible 4D grid of the job's ranks, measures the
// training-step time of each (forward, backward, gradient sync, norm, AdamW: the trainer's step),
// and compares with the planner's prediction from a machine profile (default `local`, written by
// `axonn calibrate`): Spearman rank correlation, the measured best's place in the predicted
// ranking, mean relative error of the predicted step time. docs/perf-model.md §11 has a run.
//
//   OMP_NUM_THREADS=1 mpirun -n 4 --oversubscribe build/bin/bench_plan_validate
//       [--layers 4 --channels 256 --heads 4 --vocab 2048 --seq-len 64 --batch-size 8]
//       [--machine local] [--steps 3] [--rounds 5] [--profile 1] [--json FILE]
//       [--overlap none|all] [--orders xyz|all] [--measured FILE.json]
// --measured: no timing; the rounds of an earlier run's --json (same sizes, overlap and orders) are
// scored again against --machine's profile, e.g. after a change of the cost model (one process, no
// mpirun: the rank count is the grids').
// --overlap: the step's (and the prediction's) overlap of collectives with computation (default none);
// --orders all: every grid in every rank order that places its groups differently (docs/multi-host.md).
//
// Noise: the grids are measured round-robin (round r times every grid, then round r+1), so a
// slow period of a shared machine hits every grid alike; each grid's time is the median over rounds
// of the step time (slowest rank), as `axonn calibrate` measures. The fastest round is printed too. Exit code 0 whatever the figures (it is a measurement), 2 on
// bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "axonn/measure/step_bench.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/train/step.hpp"

using namespace axonn;

namespace {

struct Options {
  int layers = 4, channels = 256, heads = 4, vocab = 2048, seq_len = 64, batch = 8;
  std::string machine = "local";
  std::string gemm = "onednn";
  int steps = 3, rounds = 5;
  bool profile = false;
  std::string json;
  std::string overlap = "none";
  std::string orders = "xyz";
  std::string measured;  // an earlier --json whose rounds are scored again, instead of timing
};

// One grid and everything trained on it.
struct Run {
  parallel::GridShape shape;
  std::unique_ptr<parallel::Grid> grid;
  std::unique_ptr<model::Gpt> gpt;
  std::unique_ptr<optim::AdamW> opt;
  measure::BenchTokens tokens;
  std::vector<double> seconds;  // mean step time of each round, slowest rank
  Profiler prof;
};

// Average ranks (1-based), ties sharing their mean rank.
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

// Pearson correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Prediction vs measurement, printed (and written as JSON with --json) by rank 0.
void report(const Options& o, planner::Workload w, const std::vector<planner::GridShape>& grids,
            const std::vector<Run>& runs) {
  const planner::MachineProfile m = planner::load_machine_profile(o.machine);
  const planner::CostSettings s = planner::settings_for(m, parallel::parse_overlap(o.overlap).any());
  w.positions = o.seq_len;
  std::vector<double> measured, fastest, predicted;
  std::vector<planner::Estimate> est;
  for (size_t i = 0; i < grids.size(); ++i) {
    est.push_back(planner::estimate(m, w, grids[i], s));
    measured.push_back(median(runs[i].seconds));
    fastest.push_back(*std::min_element(runs[i].seconds.begin(), runs[i].seconds.end()));
    predicted.push_back(est.back().total_s);
  }
  const auto mrank = ranks_of(measured), prank = ranks_of(predicted);
  const size_t best = static_cast<size_t>(std::min_element(measured.begin(), measured.end()) - measured.begin());
  const size_t pbest = static_cast<size_t>(std::min_element(predicted.begin(), predicted.end()) - predicted.begin());
  double mre = 0;
  for (size_t i = 0; i < grids.size(); ++i) mre += std::fabs(predicted[i] - measured[i]) / measured[i];
  mre /= static_cast<double>(grids.size());
  const double rho = spearman(measured, predicted);
  const double rho_fastest = spearman(fastest, predicted);

  std::printf("# bench_plan_validate: GPT L=%ld C=%ld heads=%ld Vp=%ld, T=%ld, B=%ld; %zu admissible grids of %d ranks\n",
              w.model.layers(), w.model.hidden(), w.model.heads(), w.model.vocab(), w.seq_len, w.batch_size, grids.size(),
              grids.front().size());
  std::printf("# measured: %d rounds x %d steps per grid, round-robin; median over rounds of the mean step time "
              "(slowest rank)\n", o.rounds, o.steps);
  std::printf("# predicted: profile '%s' (%s), implementation %s, overlap %s; %ld ranks per node\n", m.name.c_str(),
              o.machine.c_str(), std::string(planner::to_string(s.implementation)).c_str(), o.overlap.c_str(),
              m.gpus_per_node);
  std::printf("%-22s %9s %9s %6s %6s %9s | %9s %9s %9s %9s %9s | %s\n", "grid", "meas_ms", "pred_ms", "m_rank",
              "p_rank", "min_ms", "gemm_ms", "membw_ms", "exposed", "X/Y_ms", "Z/D_ms", "rounds_ms");
  for (size_t i = 0; i < grids.size(); ++i) {
    const auto& e = est[i];
    std::printf("%-22s %9.1f %9.1f %6.1f %6.1f %9.1f | %9.1f %9.1f %9.1f %9.1f %9.1f |", runs[i].shape.str().c_str(),
                1e3 * measured[i], 1e3 * predicted[i], mrank[i], prank[i], 1e3 * fastest[i], 1e3 * e.gemm_s,
                1e3 * e.memory_bound_s,
                1e3 * e.exposed_comm_s, 1e3 * (e.comm.x + e.comm.y), 1e3 * (e.comm.z + e.comm.data));
    for (double t : runs[i].seconds) std::printf(" %.0f", 1e3 * t);
    std::printf("\n");
    if (o.profile) runs[i].prof.print(stdout);
  }
  // the targets: issue 6's on one host, issue 18's once the grids span hosts (the profile's node size)
  const bool across_hosts = grids.front().size() > m.gpus_per_node;
  std::printf("spearman %.3f (target >= %s); against the fastest rounds %.3f\n", rho,
              across_hosts ? "0.9 across hosts" : "0.8 on one host", rho_fastest);
  std::printf("measured best %s is %.0f of %zu in the predicted ranking (target: %s); predicted best %s is %.0f "
              "measured\n",
              runs[best].shape.str().c_str(), prank[best], grids.size(), across_hosts ? "first across hosts" : "top 3 on one host",
              runs[pbest].shape.str().c_str(), mrank[pbest]);
  std::printf("mean relative error of the predicted step time %.1f%%\n", 100 * mre);
  std::fflush(stdout);
  if (!o.json.empty()) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (size_t i = 0; i < grids.size(); ++i)
      rows.push_back({{"grid", runs[i].shape.str()},
                      {"measured_s", measured[i]},
                      {"fastest_s", fastest[i]},
                      {"predicted_s", predicted[i]},
                      {"rounds_s", runs[i].seconds},
                      {"gemm_s", est[i].gemm_s},
                      {"memory_bound_s", est[i].memory_bound_s},
                      {"comm_s", est[i].comm_s},
                      {"exposed_comm_s", est[i].exposed_comm_s}});
    nlohmann::ordered_json doc = {{"workload", {{"layers", o.layers}, {"channels", o.channels}, {"heads", o.heads},
                                                {"vocab", o.vocab}, {"seq_len", o.seq_len}, {"batch_size", o.batch},
                                                {"orders", o.orders}, {"rounds", o.rounds}, {"steps", o.steps}}},
                                  {"overlap", o.overlap},
                                  {"ranks_per_node", m.gpus_per_node},
                                  {"spearman", rho},
                                  {"spearman_fastest", rho_fastest},
                                  {"measured_best_predicted_place", prank[best]},
                                  {"mean_relative_error", mre},
                                  {"grids", rows}};
    std::ofstream f(o.json);
    f << doc.dump(2) << "\n";
    f.close();
    if (f.fail()) std::fprintf(stderr, "error: cannot write --json file '%s'\n", o.json.c_str());
  }
}

int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "flag %s needs a value\n", f.c_str());
      return 2;
    }
    const char* v = argv[i + 1];
    if (f == "--layers") o->layers = std::atoi(v);
    else if (f == "--channels") o->channels = std::atoi(v);
    else if (f == "--heads") o->heads = std::atoi(v);
    else if (f == "--vocab") o->vocab = std::atoi(v);
    else if (f == "--seq-len") o->seq_len = std::atoi(v);
    else if (f == "--batch-size") o->batch = std::atoi(v);
    else if (f == "--machine") o->machine = v;
    else if (f == "--gemm") o->gemm = v;
    else if (f == "--steps") o->steps = std::atoi(v);
    else if (f == "--rounds") o->rounds = std::atoi(v);
    else if (f == "--profile") o->profile = std::atoi(v) != 0;
    else if (f == "--json") o->json = v;
    else if (f == "--overlap") o->overlap = v;
    else if (f == "--orders") o->orders = v;
    else if (f == "--measured") o->measured = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (o->layers < 1 || o->channels < 1 || o->heads < 1 || o->vocab < 1 || o->seq_len < 1 || o->batch < 1 ||
      o->steps < 1 || o->rounds < 1) {
    std::fprintf(stderr, "every size, --steps and --rounds must be positive\n");
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  Options o;
  if (int rc = parse(argc, argv, &o)) comm::Runtime::exit(rc);
  const bool root = mpi.world_rank() == 0;
  try {
    auto world = comm::world();
    kernels::set_gemm_backend(kernels::parse_gemm_backend(o.gemm));
    model::GptConfig cfg = model::gpt_preset("gpt2-tiny");
    cfg.num_layers = o.layers;
    cfg.channels = o.channels;
    cfg.num_heads = o.heads;
    cfg.vocab_size = o.vocab;
    cfg.padded_vocab_size = model::pad_vocab(o.vocab);
    cfg.max_seq_len = o.seq_len;
    cfg.validate();

    // The workload as the planner sees it, and its admissible grids for this many ranks.
    planner::Workload w;
    w.model = {"", cfg, 1};
    w.seq_len = o.seq_len;
    w.batch_size = o.batch;
    w.validate();
    nlohmann::json earlier;  // --measured: the earlier run's report
    if (!o.measured.empty()) {
      std::ifstream f(o.measured);
      AXONN_CHECK_ARG(f.good(), "--measured: cannot read '", o.measured, "'");
      earlier = nlohmann::json::parse(f, nullptr, false);
      AXONN_CHECK_ARG(!earlier.is_discarded() && earlier.contains("grids") && !earlier["grids"].empty(),
                      "--measured: '", o.measured, "' is not a bench_plan_validate --json report");
      AXONN_CHECK_ARG(earlier.value("overlap", "") == o.overlap, "--measured: '", o.measured, "' was run with --overlap ",
                      earlier.value("overlap", "?"), ", not ", o.overlap);
      if (earlier.contains("workload")) {
        const auto& wl = earlier["workload"];
        AXONN_CHECK_ARG(wl.value("layers", 0) == o.layers && wl.value("channels", 0) == o.channels &&
                            wl.value("heads", 0) == o.heads && wl.value("vocab", 0) == o.vocab &&
                            wl.value("seq_len", 0) == o.seq_len && wl.value("batch_size", 0) == o.batch &&
                            wl.value("orders", "") == o.orders,
                        "--measured: '", o.measured, "' measured another workload: give its sizes and --orders (",
                        wl.dump(), ")");
        o.rounds = wl.value("rounds", o.rounds);
        o.steps = wl.value("steps", o.steps);
      }
    }
    // the rank count: the job's, or with --measured the earlier run's (its first grid's "GxxGyxGzxGd")
    long G = world->size();
    if (!o.measured.empty()) {
      const std::string first = earlier["grids"][0].value("grid", "");
      G = 1;
      for (size_t at = 0; at < first.size() && first[at] != ' ';) {
        size_t used = 0;
        G *= std::stol(first.substr(at), &used);
        at += used + 1;  // past the 'x'
      }
    }
    std::vector<planner::GridShape> grids;
    AXONN_CHECK_ARG(o.orders == "xyz" || o.orders == "all", "--orders takes xyz or all, got '", o.orders, "'");
    const parallel::Overlap overlap = parallel::parse_overlap(o.overlap);
    for (auto g : planner::factorizations(G)) {
      if (planner::inadmissible_reason(w, g, 1)) continue;
      for (const auto& order : o.orders == "all" ? layout::distinct_orders(g) : std::vector{g.order}) {
        g.order = order;
        grids.push_back(g);
      }
    }
    AXONN_CHECK_ARG(grids.size() >= 2, "only ", grids.size(), " admissible grid(s) of ", G,
                    " ranks for this model and batch: nothing to rank; change the sizes or the rank count");

    std::vector<Run> runs(grids.size());
    if (!o.measured.empty()) {
      for (size_t i = 0; i < grids.size(); ++i) {
        const auto& g = grids[i];
        Run& r = runs[i];
        r.shape = g;
        for (const auto& row : earlier["grids"])
          if (row.value("grid", "") == r.shape.str()) r.seconds = row["rounds_s"].get<std::vector<double>>();
        AXONN_CHECK_ARG(!r.seconds.empty(), "--measured: '", o.measured, "' has no rounds of grid ", r.shape.str());
      }
      AXONN_CHECK_ARG(earlier["grids"].size() == grids.size(), "--measured: '", o.measured, "' has ",
                      earlier["grids"].size(), " grids, this workload ", grids.size());
      if (root) report(o, w, grids, runs);
      return 0;
    }
    const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
    for (size_t i = 0; i < grids.size(); ++i) {
      Run& r = runs[i];
      const auto& g = grids[i];
      r.shape = g;
      r.grid = std::make_unique<parallel::Grid>(r.shape, world);
      const int B_local = o.batch / (r.shape.gz * r.shape.gdata);
      model::GptRunOptions run;
      run.overlap = overlap;
      r.gpt = std::make_unique<model::Gpt>(cfg, *r.grid, B_local, o.seq_len, kernels::Backend::kCpu, run);
      r.gpt->init_random(1);
      r.opt = std::make_unique<optim::AdamW>(r.gpt->params(), optim::AdamWConfig{},
                                             r.gpt->decay_mask(true), ops);
      r.tokens = measure::bench_tokens(cfg, *r.grid, B_local, o.seq_len);
      r.gpt->set_profiler(&r.prof);
    }
    // The trainer's step (train::train_step), without data loading.
    auto options = [&](Run& r) {
      return train::StepOptions{.lr = 1e-4f, .grad_clip = 1.0f, .profiler = &r.prof, .agreement = world.get()};
    };
    for (Run& r : runs) train::train_step(*r.gpt, *r.opt, r.tokens.batch(), options(r));  // warm-up
    for (int round = 0; round < o.rounds; ++round) {
      for (Run& r : runs) {
        r.prof.enable(o.profile);
        r.seconds.push_back(measure::time_train_steps(*world, *r.gpt, *r.opt, r.tokens.batch(), o.steps, options(r)));
        r.prof.enable(false);
      }
    }
    if (root) report(o, w, grids, runs);
  } catch (const InvalidArgument& e) {
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    comm::Runtime::exit(2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    comm::Runtime::abort(1);
  }
  return 0;
}
