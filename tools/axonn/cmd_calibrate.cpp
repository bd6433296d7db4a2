// axonn calibrate — measure this allocation and write the `local` machine profile.
//
//   mpirun -np 4 axonn calibrate [--out FILE] [--quick] [--gemm onednn|openblas]
//
// Measures, with every rank at once (as in a training step): the sgemm rate of the CPU GEMM backend
// with the current threads, on square and transformer-like shapes; the memory bandwidth per rank
// that the memory-bound kernels reach (the AdamW update's);
// and all-reduce, all-gather and reduce-scatter at every position a 4D grid of this job can put a
// group in — p ranks spaced ip apart, ip·p dividing the job, all such groups at once — over a sweep
// of message sizes. The planner's part (planner/calibration.hpp, no MPI) fits the cost model's
// parameters to these samples and writes the profile; this file only measures. Default output:
// ~/.config/axonn/profiles/local.json (planner::user_profile_dir()), where `axonn plan --machine
// local` and `axonn train --grid auto` find it. docs/perf-model.md §4.1 maps every field.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/planner/calibration.hpp"
#include "commands.hpp"

namespace axonn::tools {
namespace {

using comm::Communicator;
using comm::ReduceOp;
using planner::CollectiveKind;

struct CalibrateOptions {
  std::string out;
  bool quick = false;
  std::string gemm = "onednn";
};

// Every measurement is a point: a call repeated in batches, every rank at once. The points are
// measured round-robin (round r times one batch of every point, then round r+1), so the other load of
// a shared machine falls on all of them alike; a point's time per call is the median over rounds of
// the batch's time from a barrier before to a barrier after (every rank done), per call. `iters` per batch adapts so that a batch lasts about `batch_s` (decided
// from the slowest rank's warm-up call, hence the same on every rank).
class RoundRobin {
 public:
  explicit RoundRobin(Communicator& world) : world_(world) {}
  // Returns the point's index.
  size_t add(std::function<void()> fn) {
    points_.push_back({std::move(fn), 0, {}});
    return points_.size() - 1;
  }
  void run(int rounds, double batch_s) {
    for (Point& p : points_) {
      world_.barrier();
      Timer warm;
      p.fn();
      world_.barrier();
      float t0 = static_cast<float>(warm.seconds());
      world_.all_reduce(&t0, 1, DType::kF32, ReduceOp::kMax);  // over world
      p.iters = std::clamp(static_cast<int>(batch_s / std::max(static_cast<double>(t0), 1e-7)), 2, 1000);
    }
    for (int r = 0; r < rounds; ++r)
      for (Point& p : points_) {
        world_.barrier();
        Timer t;
        for (int i = 0; i < p.iters; ++i) p.fn();
        // Until every rank is done: with more ranks than cores a rank's own clock would miss the
        // time it waited for a core before it started.
        world_.barrier();
        float sec = static_cast<float>(t.seconds() / p.iters);
        world_.all_reduce(&sec, 1, DType::kF32, ReduceOp::kMax);  // over world
        p.seconds.push_back(sec);
      }
  }
  double seconds(size_t i) const {
    std::vector<double> v = points_[i].seconds;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }

 private:
  struct Point {
    std::function<void()> fn;
    int iters;
    std::vector<double> seconds;
  };
  Communicator& world_;
  std::vector<Point> points_;
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto s = line.substr(colon + 1);
        s.erase(0, s.find_first_not_of(' '));
        return s;
      }
    }
  return "";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Every rank's host name, gathered (64 bytes each).
std::vector<std::string> host_names(Communicator& world) {
  constexpr size_t kLen = 64;
  char mine[kLen] = {};
  gethostname(mine, kLen - 1);
  std::vector<char> all(kLen * static_cast<size_t>(world.size()));
  world.all_gather(mine, all.data(), kLen / 4, DType::kI32);  // over world
  std::vector<std::string> hosts;
  for (int r = 0; r < world.size(); ++r) hosts.emplace_back(all.data() + kLen * static_cast<size_t>(r));
  return hosts;
}

// The positions a 4D grid of `ranks` can put a group in: size p >= 2 spaced ip apart, ip·p | ranks.
std::vector<std::pair<long, long>> positions(long ranks) {
  std::vector<std::pair<long, long>> out;
  for (long p = 2; p <= ranks; ++p)
    for (long ip = 1; ip * p <= ranks; ++ip)
      if (ranks % (ip * p) == 0) out.emplace_back(ip, p);
  std::sort(out.begin(), out.end(), [](auto a, auto b) { return a.second != b.second ? a.second < b.second : a.first < b.first; });
  return out;
}

// sgemm on shapes that span what a GPT step issues (square, the linear layers' skinny products,
// the attention's small T×T×hs ones).
std::vector<planner::GemmSample> gemm_shapes(bool quick) {
  if (quick) return {{256, 256, 256}, {512, 64, 128}, {64, 64, 32}};
  return {{1024, 1024, 1024}, {512, 768, 256}, {512, 256, 256}, {512, 1024, 64}, {512, 64, 256},
          {256, 256, 32},     {128, 128, 64},  {64, 64, 32},    {64, 32, 64}};
}

// Message sizes of the collective sweep, bytes.
std::vector<size_t> message_sizes(bool quick) {
  if (quick) return {8, 4096, 262144};
  return {8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20};
}

const CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter};

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

  planner::Calibration c;
  c.date = utc_now();
  c.quick = o.quick;
  c.ranks = w.size();
  c.threads_per_rank = kernels::cpu_threads();
  c.gemm_backend = std::string(kernels::gemm_backend_name(kernels::gemm_backend()));
  c.cpu = cpu_model();
  const auto hosts = host_names(w);
  c.host = hosts.front();
  std::vector<std::string> distinct = hosts;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  c.nodes = static_cast<long>(distinct.size());
  c.ranks_per_node = std::count(hosts.begin(), hosts.end(), hosts.front());
  if (root && c.ranks_per_node * c.nodes != c.ranks)
    log_warn("calibrate: the nodes hold different numbers of ranks; gpus_per_node = %ld (rank 0's node)",
             c.ranks_per_node);
  const double node_bytes =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  c.memory_gib = node_bytes / static_cast<double>(c.ranks_per_node) / (1024.0 * 1024.0 * 1024.0);

  if (root)
    std::printf("# axonn calibrate%s: %ld ranks on %ld node(s) (%s), %ld thread(s) per rank, %s sgemm\n",
                o.quick ? " --quick" : "", c.ranks, c.nodes, c.host.c_str(), c.threads_per_rank,
                c.gemm_backend.c_str());
  RoundRobin rr(w);
  // sgemm
  c.gemm = gemm_shapes(o.quick);
  std::vector<std::vector<float>> gemm_buffers;
  std::vector<size_t> gemm_points;
  for (const auto& g : c.gemm) {
    const size_t base = gemm_buffers.size();
    gemm_buffers.emplace_back(static_cast<size_t>(g.m * g.k), 0.5f);
    gemm_buffers.emplace_back(static_cast<size_t>(g.k * g.n), 0.25f);
    gemm_buffers.emplace_back(static_cast<size_t>(g.m * g.n), 0.0f);
    gemm_points.push_back(rr.add([&gemm_buffers, base, g] {
      kernels::sgemm(false, false, g.m, g.n, g.k, 1.0f, gemm_buffers[base].data(), g.k, gemm_buffers[base + 1].data(),
                     g.n, 0.0f, gemm_buffers[base + 2].data(), g.n);
    }));
  }
  // memory-bound kernels: the AdamW update (the largest of them in a step; reads parameter, gradient,
  // m, v and writes three of them: 28 bytes per parameter) over arrays larger than the caches
  const size_t stream_n = o.quick ? (size_t{512} << 10) : (size_t{2} << 20);
  std::vector<float> sp(stream_n, 0.5f), sm(stream_n, 0.0f), sv(stream_n, 0.0f), sg(stream_n, 1e-3f);
  const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
  const size_t stream_point = rr.add([&] {
    ops.adamw_update(sp.data(), sm.data(), sv.data(), sg.data(), static_cast<int64_t>(stream_n), 1e-4f, 0.9f, 0.999f,
                     1e-8f, 0.0f, 1.0f, 1);
  });
  // collectives: every position (ip, p) a grid of this job can put a group in, all its groups at once
  struct CollPoint {
    CollectiveKind kind;
    long ip, p;
    bool intra;
    std::vector<std::pair<double, size_t>> sizes;  // bytes, point
  };
  std::vector<CollPoint> coll;
  std::vector<std::unique_ptr<Communicator>> groups;
  const auto sizes = message_sizes(o.quick);
  std::vector<float> ca(sizes.back() / 4 + static_cast<size_t>(c.ranks)), cb(ca.size());
  for (const auto& [ip, p] : positions(c.ranks)) {
    const long r = w.rank();
    const int color = static_cast<int>(r / (ip * p) * ip + r % ip);
    const int key = static_cast<int>((r / ip) % p);
    groups.push_back(w.split(color, key, "calibrate"));
    Communicator* g = groups.back().get();
    bool intra = true;  // every group of this position on one host
    for (long first = 0; first < c.ranks; ++first) {
      if ((first / ip) % p != 0) continue;
      for (long k = 1; k < p; ++k)
        if (hosts[static_cast<size_t>(first + k * ip)] != hosts[static_cast<size_t>(first)]) intra = false;
    }
    const auto P = static_cast<size_t>(p);
    for (CollectiveKind kind : kKinds) {
      CollPoint cp{kind, ip, p, intra, {}};
      for (size_t bytes : sizes) {
        // elements: the all-reduce's buffer; whole blocks of at least one for the others
        size_t count = std::max<size_t>(bytes / 4, 1);
        if (kind != CollectiveKind::kAllReduce) count = std::max<size_t>(count / P, 1) * P;
        float* a = ca.data();
        float* b = cb.data();
        size_t point = rr.add([g, kind, count, P, a, b] {
          switch (kind) {
            case CollectiveKind::kAllReduce:
              g->all_reduce(a, count, DType::kF32);
              break;
            case CollectiveKind::kAllGather:
              g->all_gather(a, b, count / P, DType::kF32);
              break;
            case CollectiveKind::kReduceScatter:
              g->reduce_scatter(a, b, count / P, DType::kF32);
              break;
          }
        });
        cp.sizes.emplace_back(4.0 * static_cast<double>(count), point);
      }
      coll.push_back(std::move(cp));
    }
  }
  // a collective between computations: [burst; 8-byte all-reduce over the world] against [burst]
  const long burst_n = 128, burst_gemms = 4;  // ≈ 0.1-0.5 ms of compute per rank
  std::vector<float> ba(static_cast<size_t>(burst_n * burst_n), 0.5f), bb(ba.size(), 0.25f), bc(ba.size(), 0.0f);
  auto burst = [&] {
    for (long i = 0; i < burst_gemms; ++i)
      kernels::sgemm(false, false, burst_n, burst_n, burst_n, 1.0f, ba.data(), burst_n, bb.data(), burst_n, 0.0f,
                     bc.data(), burst_n);
  };
  float sync_value = 0.0f;
  const size_t burst_point = rr.add(burst);
  const size_t burst_sync_point = c.ranks > 1 ? rr.add([&] {
    burst();
    w.all_reduce(&sync_value, 1, DType::kF32);  // over world
  })
                                              : burst_point;
  rr.run(o.quick ? 3 : 7, o.quick ? 0.004 : 0.02);

  for (size_t i = 0; i < c.gemm.size(); ++i) c.gemm[i].seconds = rr.seconds(gemm_points[i]);
  c.gemm_fit = planner::fit_gemm(c.gemm);
  c.stream_gbs = 28.0 * static_cast<double>(stream_n) / rr.seconds(stream_point) * 1e-9;
  if (root) {
    std::printf("gemm     %.2f GFLOP/s + %.2f us per call (fit within %.0f%%):", c.gemm_fit.gflops, c.gemm_fit.call_us,
                100 * c.gemm_fit.max_rel_error);
    for (const auto& g : c.gemm) std::printf(" %ldx%ldx%ld %.1f", g.m, g.n, g.k, g.flops() / g.seconds * 1e-9);
    std::printf(" GFLOP/s\nmemory   %.2f GB/s per rank (AdamW kernel)\n", c.stream_gbs);
    std::printf("%-15s %4s %4s %6s %10s %12s %8s\n", "collective", "ip", "p", "node", "busbw_GB/s", "alpha_us",
                "fit_err");
  }
  double tight_ar = 0;  // the 8-byte all-reduce over all ranks in a tight loop
  for (const auto& cp : coll)
    if (cp.kind == CollectiveKind::kAllReduce && cp.ip == 1 && cp.p == c.ranks) tight_ar = rr.seconds(cp.sizes.front().second);
  c.sync_us = c.ranks > 1 ? std::max(0.0, rr.seconds(burst_sync_point) - rr.seconds(burst_point) - tight_ar) * 1e6 : 0.0;
  if (root)
    std::printf("sync     %.2f us per collective between computations (burst %.3f ms, with an all-reduce %.3f ms)\n",
                c.sync_us, rr.seconds(burst_point) * 1e3, rr.seconds(burst_sync_point) * 1e3);
  for (const auto& cp : coll) {
    std::vector<planner::CollectiveSample> samples;
    for (const auto& [bytes, point] : cp.sizes) samples.push_back({bytes, rr.seconds(point)});
    auto fit = planner::fit_collective(cp.kind, cp.ip, cp.p, std::move(samples));
    fit.intra_node = cp.intra;
    if (root)
      std::printf("%-15s %4ld %4ld %6s %10.3f %12.2f %7.0f%%\n", std::string(planner::to_string(cp.kind)).c_str(), cp.ip,
                  cp.p, fit.intra_node ? "intra" : "inter", fit.gbs, fit.latency_us, 100 * fit.max_rel_error);
    c.collectives.push_back(std::move(fit));
  }
  if (root) std::fflush(stdout);

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
  sub->add_option("--out", o->out, "profile file to write (default: ~/.config/axonn/profiles/local.json, or "
                                   "$XDG_CONFIG_HOME/axonn/profiles/local.json)");
  sub->add_flag("--quick", o->quick, "fewer sizes and repetitions: a rough profile in seconds");
  sub->add_option("--gemm", o->gemm, "CPU GEMM backend to measure: onednn|openblas")->capture_default_str();
  sub->callback([action, o] { *action = [o] { return run_calibrate(*o); }; });
}

}  // namespace axonn::tools
