// measure/calibrate.cpp — the measurements of `axonn calibrate` (calibrate.hpp).
#include "axonn/measure/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axonn/measure/timing.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/core/log.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/train/peak.hpp"

namespace axonn::measure {
namespace {

using comm::Communicator;
using planner::CollectiveKind;

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

}  // namespace

planner::Calibration calibrate(Communicator& w, bool quick) {
  const bool root = w.rank() == 0;
  planner::Calibration c;
  c.date = utc_now();
  c.quick = quick;
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
                quick ? " --quick" : "", c.ranks, c.nodes, c.host.c_str(), c.threads_per_rank,
                c.gemm_backend.c_str());
  RoundRobin rr(w);
  // sgemm
  c.gemm = gemm_shapes(quick);
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
  const size_t stream_n = quick ? (size_t{512} << 10) : (size_t{2} << 20);
  std::vector<float> sp(stream_n, 0.5f), sm(stream_n, 0.0f), sv(stream_n, 0.0f), sg(stream_n, 1e-3f);
  const auto& ops = kernels::ops_for(kernels::Backend::kCpu);
  const size_t stream_point = rr.add([&] {
    ops.adamw_update(sp.data(), nullptr, sm.data(), sv.data(), sg.data(), static_cast<int64_t>(stream_n), 1e-4f,
                     0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1);
  });
  // collectives: every position (ip, p) a grid of this job can put a group in, all its groups at once
  struct CollPoint {
    CollectiveKind kind;
    long ip, p;
    bool intra;
    bool async;
    std::vector<std::pair<double, size_t>> sizes;  // bytes, point
  };
  std::vector<CollPoint> coll;
  std::vector<std::unique_ptr<Communicator>> groups;
  std::vector<std::pair<Communicator*, bool>> position_groups;  // each position's group, and whether it is intra-node
  const auto sizes = message_sizes(quick);
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
    position_groups.emplace_back(g, intra);
    const auto P = static_cast<size_t>(p);
    // each collective blocking, and non-blocking + wait: the trainer issues the forward all-reduces
    // and LayerNorm statistics blocking, everything that can overlap non-blocking (MPI runs other
    // algorithms for the two: Open MPI's coll/tuned and libnbc)
    for (bool async : {false, true})
      for (CollectiveKind kind : kKinds) {
        CollPoint cp{kind, ip, p, intra, async, {}};
        for (size_t bytes : sizes) {
          // elements: the all-reduce's buffer; whole blocks of at least one for the others
          size_t count = std::max<size_t>(bytes / 4, 1);
          if (kind != CollectiveKind::kAllReduce) count = std::max<size_t>(count / P, 1) * P;
          float* a = ca.data();
          float* b = cb.data();
          size_t point = rr.add([g, kind, count, P, a, b, async] {
            switch (kind) {
              case CollectiveKind::kAllReduce:
                if (async) g->all_reduce_async(a, count, DType::kF32)->wait();
                else g->all_reduce(a, count, DType::kF32);
                break;
              case CollectiveKind::kAllGather:
                if (async) g->all_gather_async(a, b, count / P, DType::kF32)->wait();
                else g->all_gather(a, b, count / P, DType::kF32);
                break;
              case CollectiveKind::kReduceScatter:
                if (async) g->reduce_scatter_async(a, b, count / P, DType::kF32)->wait();
                else g->reduce_scatter(a, b, count / P, DType::kF32);
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
  // How much of a non-blocking collective computation covers, inside a node and across nodes: [start
  // an all-reduce, a GEMM burst, wait] against the burst alone and the all-reduce (started, waited)
  // alone, in the narrowest position of each kind. The trainer's overlap is this pattern. The burst is
  // sized to last about as long as the all-reduce (timed once before), so that neither hides in the
  // other's noise.
  struct OverlapPoint {
    bool intra;
    size_t burst, alone, both;
  };
  std::vector<OverlapPoint> overlap_points;
  const long overlap_n = 256;
  std::vector<float> oa(static_cast<size_t>(overlap_n * overlap_n), 0.5f), ob(oa.size(), 0.25f), oc(oa.size(), 0.0f);
  std::vector<float> overlap_buffer((quick ? 65536 : 262144) / 4, 1.0f);
  auto gemm_256 = [&] {
    kernels::sgemm(false, false, overlap_n, overlap_n, overlap_n, 1.0f, oa.data(), overlap_n, ob.data(), overlap_n, 0.0f,
                   oc.data(), overlap_n);
  };
  auto time_once = [&](const std::function<void()>& fn) {  // the slowest rank's, of the second of two calls
    fn();
    w.barrier();
    Timer t;
    fn();
    return measure::max_over(w, t.seconds());
  };
  const double gemm_256_s = time_once(gemm_256);
  for (bool intra : {true, false}) {
    const auto it = std::find_if(position_groups.begin(), position_groups.end(), [&](auto pg) { return pg.second == intra; });
    if (it == position_groups.end()) continue;
    Communicator* g = it->first;
    float* buf = overlap_buffer.data();
    const size_t count = overlap_buffer.size();
    auto all_reduce = [g, buf, count] { g->all_reduce_async(buf, count, DType::kF32)->wait(); };
    const long gemms = std::clamp(std::lround(time_once(all_reduce) / std::max(gemm_256_s, 1e-9)), 1L, 256L);
    auto gemm_burst = [gemms, gemm_256] {
      for (long i = 0; i < gemms; ++i) gemm_256();
    };
    const size_t both = rr.add([g, buf, count, gemm_burst] {
      auto pending = g->all_reduce_async(buf, count, DType::kF32);
      gemm_burst();
      pending->wait();
    });
    overlap_points.push_back({intra, rr.add(gemm_burst), rr.add(all_reduce), both});
  }
  float sync_value = 0.0f;
  const size_t burst_point = rr.add(burst);
  const size_t burst_sync_point = c.ranks > 1 ? rr.add([&] {
    burst();
    w.all_reduce(&sync_value, 1, DType::kF32);  // over world
  })
                                              : burst_point;
  const int rounds = quick ? 3 : 7;
  {
    ProgressOptions po;
    po.unit = "measurements";
    Progress progress("calibrate", static_cast<int64_t>(rr.size()) * (rounds + 1), po);  // rank 0 draws
    rr.run(rounds, quick ? 0.004 : 0.02, &progress);
  }

  // MFU's peaks for axonn train (train/peak.hpp): the best of several timings and sizes, every rank at once
  c.mfu_peak_fp32_gflops = train::measure_cpu_peak_gflops(w, false, train::kThoroughPeakSizes,
                                                          quick ? train::kRunPeakTrials : train::kThoroughPeakTrials);
  c.mfu_peak_bf16_gflops = train::measure_cpu_peak_gflops(w, true, train::kThoroughPeakSizes,
                                                          quick ? train::kRunPeakTrials : train::kThoroughPeakTrials);
  c.bf16_gemm = kernels::gemm_bf16_kernel();

  for (size_t i = 0; i < c.gemm.size(); ++i) c.gemm[i].seconds = rr.seconds(gemm_points[i]);
  c.gemm_fit = planner::fit_gemm(c.gemm);
  c.stream_gbs = 28.0 * static_cast<double>(stream_n) / rr.seconds(stream_point) * 1e-9;
  if (root) {
    std::printf("gemm     %.2f GFLOP/s + %.2f us per call (fit within %.0f%%):", c.gemm_fit.gflops, c.gemm_fit.call_us,
                100 * c.gemm_fit.max_rel_error);
    for (const auto& g : c.gemm) std::printf(" %ldx%ldx%ld %.1f", g.m, g.n, g.k, g.flops() / g.seconds * 1e-9);
    std::printf(" GFLOP/s\nmemory   %.2f GB/s per rank (AdamW kernel)\n", c.stream_gbs);
    std::printf("mfu peak %.1f GFLOP/s sgemm, %.1f GFLOP/s bf16 GEMM (%s) per rank, every rank at once\n",
                c.mfu_peak_fp32_gflops, c.mfu_peak_bf16_gflops, c.bf16_gemm.c_str());
    std::printf("%-15s %5s %4s %4s %6s %10s %12s %8s\n", "collective", "form", "ip", "p", "node", "busbw_GB/s",
                "alpha_us", "fit_err");
  }
  double tight_ar = 0;  // the 8-byte all-reduce over all ranks in a tight loop
  for (const auto& cp : coll)
    if (cp.kind == CollectiveKind::kAllReduce && cp.ip == 1 && cp.p == c.ranks && !cp.async)
      tight_ar = rr.seconds(cp.sizes.front().second);
  c.sync_us = c.ranks > 1 ? std::max(0.0, rr.seconds(burst_sync_point) - rr.seconds(burst_point) - tight_ar) * 1e6 : 0.0;
  if (root)
    std::printf("sync     %.2f us per collective between computations (burst %.3f ms, with an all-reduce %.3f ms)\n",
                c.sync_us, rr.seconds(burst_point) * 1e3, rr.seconds(burst_sync_point) * 1e3);
  for (const auto& op : overlap_points) {
    const double burst_s = rr.seconds(op.burst), coll_s = rr.seconds(op.alone), both_s = rr.seconds(op.both);
    const double share = std::clamp((burst_s + coll_s - both_s) / std::min(burst_s, coll_s), 0.0, 1.0);
    (op.intra ? c.intra_node_overlap : c.inter_node_overlap) = share;
    if (root)
      std::printf("overlap  %.2f of an %s all-reduce's time hidden under GEMMs (burst %.3f ms, all-reduce %.3f ms, "
                  "both %.3f ms)\n",
                  share, op.intra ? "intra-node" : "inter-node", burst_s * 1e3, coll_s * 1e3, both_s * 1e3);
  }
  for (const auto& cp : coll) {
    std::vector<planner::CollectiveSample> samples;
    for (const auto& [bytes, point] : cp.sizes) samples.push_back({bytes, rr.seconds(point)});
    auto fit = planner::fit_collective(cp.kind, cp.ip, cp.p, std::move(samples));
    fit.intra_node = cp.intra;
    fit.async = cp.async;
    if (root)
      std::printf("%-15s %5s %4ld %4ld %6s %10.3f %12.2f %7.0f%%\n", std::string(planner::to_string(cp.kind)).c_str(),
                  cp.async ? "async" : "block", cp.ip, cp.p, fit.intra_node ? "intra" : "inter", fit.gbs,
                  fit.latency_us, 100 * fit.max_rel_error);
    c.collectives.push_back(std::move(fit));
  }
  if (root) std::fflush(stdout);

  return c;
}

}  // namespace axonn::measure
