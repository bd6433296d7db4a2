// measure/comm_bench.cpp — `axonn bench comm` and `axonn bench overlap` (comm_bench.hpp).
#include "axonn/measure/comm_bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "axonn/measure/timing.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/launch/job.hpp"

namespace axonn::measure {
namespace {

using comm::Communicator;
using comm::ReduceOp;
using parallel::GridGroup;

// ---------------------------------------------------------------------------------------------
// Shared helpers

// A typed buffer the checks write and read through float (exact for the small integers used).
class Values {
 public:
  Values(DType t, size_t bytes) : t_(t), bytes_(bytes) {}
  void* data() { return bytes_.data(); }
  void set(size_t i, float v) {
    if (t_ == DType::kBF16) {
      const uint16_t b = f32_to_bf16(v);
      std::memcpy(bytes_.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes_.data() + 4 * i, &v, 4);
    }
  }
  float get(size_t i) const {
    if (t_ == DType::kBF16) {
      uint16_t b;
      std::memcpy(&b, bytes_.data() + 2 * i, 2);
      return bf16_to_f32(b);
    }
    float v;
    std::memcpy(&v, bytes_.data() + 4 * i, 4);
    return v;
  }
  void zero() { std::fill(bytes_.begin(), bytes_.end(), 0); }

 private:
  DType t_;
  std::vector<unsigned char> bytes_;
};

// ---------------------------------------------------------------------------------------------
// axonn bench comm


enum class Op { kAllReduce, kAllGather, kReduceScatter };
const char* op_name(Op op) {
  switch (op) {
    case Op::kAllReduce: return "all_reduce";
    case Op::kAllGather: return "all_gather";
    case Op::kReduceScatter: return "reduce_scatter";
  }
  return "?";
}
// nccl-tests' bus-bandwidth factors (ring algorithms): the bytes each link carries per byte of data.
double busbw_factor(Op op, int n) {
  const double f = static_cast<double>(n - 1) / n;
  return op == Op::kAllReduce ? 2 * f : f;
}

class CommBench {
 public:
  CommBench(const CommBenchOptions& o, parallel::Grid& grid, DType dtype)
      : o_(o), grid_(grid), t_(dtype), es_(dtype_size(dtype)),
        a_(dtype, static_cast<size_t>(o.max_bytes)), b_(dtype, static_cast<size_t>(o.max_bytes)) {}

  // Runs one (group, op, size) point: times it, then checks one call against closed-form values.
  // Returns the number of wrong elements over all ranks.
  int64_t point(Communicator& c, const std::string& label, Op op, int64_t bytes) {
    const auto n = static_cast<size_t>(c.size());
    // Elements per rank-block; all-gather and reduce-scatter sizes are whole blocks per rank.
    size_t count = static_cast<size_t>(bytes) / es_;
    if (op != Op::kAllReduce) count = count / n * n;
    if (count == 0) return 0;
    Communicator& world = grid_.world();
    a_.zero();  // timing runs on zeros: sums stay finite however many iterations
    b_.zero();
    for (int i = 0; i < o_.warmup; ++i) call(c, op, count);
    // Mean time per call over `iters` calls (nccl-tests); with --rounds R the best of R such
    // means, which filters out the preemptions of a shared machine.
    double t = 0;
    for (int round = 0; round < o_.rounds; ++round) {
      world.barrier();  // every group of this kind starts together, as in a training step
      Timer timer;
      for (int i = 0; i < o_.iters; ++i) call(c, op, count);
      const double mean = max_over(world, timer.seconds() / o_.iters);
      t = round == 0 ? mean : std::min(t, mean);
    }
    const int64_t wrong = sum_over(world, check(c, op, count));
    if (world.rank() == 0) {
      const double size = static_cast<double>(count * es_);
      const double algbw = size / t * 1e-9;
      std::printf("%10s %-14s %12zu %11zu %4s %11.1f %9.3f %9.3f %8lld\n", label.c_str(),
                  op_name(op), count * es_, count, std::string(dtype_name(t_)).c_str(), t * 1e6,
                  algbw, algbw * busbw_factor(op, c.size()), static_cast<long long>(wrong));
      std::fflush(stdout);
    }
    return wrong;
  }

 private:
  // The collective under test: `count` elements in total (all-reduce: per rank; all-gather:
  // gathered; reduce-scatter: scattered), as nccl-tests counts them.
  void call(Communicator& c, Op op, size_t count) {
    const auto n = static_cast<size_t>(c.size());
    std::unique_ptr<comm::Work> w;
    switch (op) {
      case Op::kAllReduce:
        if (o_.async) w = c.all_reduce_async(a_.data(), count, t_);
        else c.all_reduce(a_.data(), count, t_);
        break;
      case Op::kAllGather:
        if (o_.async) w = c.all_gather_async(a_.data(), b_.data(), count / n, t_);
        else c.all_gather(a_.data(), b_.data(), count / n, t_);
        break;
      case Op::kReduceScatter:
        if (o_.async) w = c.reduce_scatter_async(a_.data(), b_.data(), count / n, t_);
        else c.reduce_scatter(a_.data(), b_.data(), count / n, t_);
        break;
    }
    if (w) w->wait();
  }

  // One call on rank-dependent inputs; returns this rank's wrong elements. bf16 is allowed the
  // rounding of its combining steps (inputs up to 3n, sums exact below 256).
  int64_t check(Communicator& c, Op op, size_t count) {
    const auto n = static_cast<size_t>(c.size());
    const auto r = static_cast<float>(c.rank());
    const float tri = static_cast<float>(n * (n + 1) / 2);
    const float tol = t_ == DType::kBF16 ? static_cast<float>(n) / 256.0f : 0.0f;
    int64_t wrong = 0;
    auto expect = [&](float got, float want) {
      wrong += std::fabs(got - want) > tol * std::fabs(want);
    };
    switch (op) {
      case Op::kAllReduce:
        for (size_t i = 0; i < count; ++i) a_.set(i, (r + 1) * static_cast<float>(i % 3 + 1));
        call(c, op, count);
        for (size_t i = 0; i < count; ++i) expect(a_.get(i), tri * static_cast<float>(i % 3 + 1));
        break;
      case Op::kAllGather: {
        const size_t block = count / n;
        for (size_t i = 0; i < block; ++i) a_.set(i, r * 16 + static_cast<float>(i % 16));
        call(c, op, count);
        for (size_t k = 0; k < count; ++k)
          expect(b_.get(k), static_cast<float>((k / block) * 16 + (k % block) % 16));
        break;
      }
      case Op::kReduceScatter: {
        const size_t block = count / n;
        for (size_t k = 0; k < count; ++k)
          a_.set(k, (r + 1) * static_cast<float>((k / block + k % block) % 3 + 1));
        call(c, op, count);
        const auto me = static_cast<size_t>(c.rank());
        for (size_t i = 0; i < block; ++i)
          expect(b_.get(i), tri * static_cast<float>((me + i) % 3 + 1));
        break;
      }
    }
    return wrong;
  }

  const CommBenchOptions& o_;
  parallel::Grid& grid_;
  DType t_;
  size_t es_;
  Values a_, b_;
};

}  // namespace

int run_comm_bench(const CommBenchOptions& o) {
  auto world = comm::world();
  // bad flags throw InvalidArgument alike on every rank; main prints it once and exits quietly
  parallel::GridShape shape = parallel::parse_grid(o.grid, world->size());
  if (!o.grid_order.empty()) shape.order = parallel::parse_grid_order(o.grid_order);
  const bool flags_ok = o.min_bytes > 0 && o.max_bytes >= o.min_bytes && o.step_factor >= 2 &&
                        o.iters >= 1 && o.rounds >= 1 && o.warmup >= 0;
  if (!flags_ok)
    throw InvalidArgument("bench comm: need 0 < --min-bytes <= --max-bytes, --step-factor >= 2, "
                          "--iters >= 1, --rounds >= 1, --warmup >= 0");
  const DType dtype = parse_precision(o.dtype);
  parallel::Grid grid(shape, world);
  const launch::Launch launch = launch::detect_launch(*world);  // which hosts the ranks are on
  if (world->rank() == 0) {
    std::printf("# axonn bench comm: grid %s (Gx,Gy,Gz,Gdata), %d ranks, %s, warmup %d, iters %d, "
                "rounds %d, %s\n", shape.str().c_str(), world->size(), o.dtype.c_str(), o.warmup,
                o.iters, o.rounds, o.async ? "non-blocking + wait" : "blocking");
    std::printf("# launch %s\n", launch.str().c_str());
    std::printf("# every group of a kind runs at once; time = max over all ranks of the mean time "
                "per call (best round)\n# size = bytes per rank (all_reduce), gathered (all_gather), "
                "scattered (reduce_scatter); busbw factors 2(n-1)/n, (n-1)/n, (n-1)/n\n");
    std::printf("#%9s %-14s %12s %11s %4s %11s %9s %9s %8s\n", "group(n)", "op", "size(B)",
                "count", "type", "time(us)", "algbw", "busbw", "#wrong");
    std::printf("#%9s %-14s %12s %11s %4s %11s %9s %9s %8s\n", "", "", "", "(elements)", "",
                "", "(GB/s)", "(GB/s)", "");
  }
  CommBench bench(o, grid, dtype);
  int64_t wrong = 0;
  // Every distinct non-trivial group (same membership = same group: e.g. data = world on
  // 1,1,1,N), in the grid's order. The second Z is Z's twin and is skipped.
  std::vector<std::vector<int>> seen;
  for (GridGroup g : parallel::kAllGridGroups) {
    if (g == GridGroup::kZ2) continue;
    const auto members = parallel::grid_group_members(shape, 0, g);
    if (members.size() < 2 || std::find(seen.begin(), seen.end(), members) != seen.end()) continue;
    seen.push_back(members);
    Communicator& c = grid.group(g);
    const std::string label = std::string(parallel::grid_group_name(g)) + "(" +
                              std::to_string(c.size()) + ")";
    if (world->rank() == 0 && launch.nodes > 1) {
      const int nodes = parallel::grid_group_nodes(shape, g, launch.node_of_rank);
      std::printf("# %s: rank 0's group", label.c_str());
      for (int m : members) std::printf(" %d", m);
      std::printf(nodes == 1 ? ", inside one node\n" : ", across %d nodes\n", nodes);
    }
    for (Op op : {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter})
      for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor)
        wrong += bench.point(c, label, op, bytes);
  }
  if (world->rank() == 0) {
    if (seen.empty()) std::printf("# every group of grid %s has one rank: nothing to measure\n", shape.str().c_str());
    std::printf("# %s: %lld wrong elements\n", wrong ? "FAILED" : "OK", static_cast<long long>(wrong));
  }
  return wrong == 0 ? 0 : 1;
}

namespace {

// ---------------------------------------------------------------------------------------------
// axonn bench overlap


// C[n,n] += A[n,n] @ B[n,n], rows split over `threads` std::threads. A tiled loop nest that the
// compiler vectorises, working on cache-resident tiles so that it is bound by arithmetic, not by
// memory: a stand-in for the BLAS GEMM of a layer. What matters here is that it keeps the cores
// busy and never calls MPI, as BLAS and OpenMP do not.
void compute(const std::vector<float>& A, const std::vector<float>& B, std::vector<float>& C,
             int n, int threads) {
  constexpr size_t kTileK = 128, kTileJ = 256;  // a 128 KiB tile of B stays in L2
  const auto N = static_cast<size_t>(n);
  auto rows = [&](size_t r0, size_t r1) {
    for (size_t kk = 0; kk < N; kk += kTileK)
      for (size_t jj = 0; jj < N; jj += kTileJ) {
        const size_t k1 = std::min(N, kk + kTileK), j1 = std::min(N, jj + kTileJ);
        for (size_t i = r0; i < r1; ++i) {
          float* c = &C[i * N];
          for (size_t k = kk; k < k1; ++k) {
            const float a = A[i * N + k];
            const float* b = &B[k * N];
            for (size_t j = jj; j < j1; ++j) c[j] += a * b[j];
          }
        }
      }
  };
  if (threads <= 1) return rows(0, N);
  std::vector<std::thread> pool;
  const auto T = static_cast<size_t>(threads);
  for (size_t t = 0; t < T; ++t) pool.emplace_back(rows, N * t / T, N * (t + 1) / T);
  for (auto& th : pool) th.join();
}

struct Mode {
  std::string name;
  comm::CommOptions options;
};

std::vector<Mode> parse_modes(const std::string& text) {
  std::vector<Mode> modes;
  std::stringstream ss(text);
  std::string m;
  while (std::getline(ss, m, ',')) {
    if (m == "none") {
      modes.push_back({m, comm::CommOptions{false, 0}});
    } else if (m.rfind("thread:", 0) == 0) {
      int us = -1;
      try {
        us = std::stoi(m.substr(7));
      } catch (const std::exception&) {
      }
      AXONN_CHECK_ARG(us >= 0, "--modes: bad poll interval in '", m, "'");
      modes.push_back({m, comm::CommOptions{true, us}});
    } else {
      AXONN_CHECK_ARG(false, "--modes wants a comma list of none | thread:<poll_us>, got '", m, "'");
    }
  }
  AXONN_CHECK_ARG(!modes.empty(), "--modes is empty");
  return modes;
}

}  // namespace

int run_overlap_bench(const OverlapOptions& o) {
  std::vector<Mode> modes;
  const bool flags_ok = o.bytes >= 4 && o.gemm_n >= 1 && o.threads >= 1 && o.reps >= 1 &&
                        (o.op == "all_reduce" || o.op == "all_gather" || o.op == "reduce_scatter");
  std::string error = flags_ok ? "" : "bench overlap: need --bytes >= 4, --gemm-n, --threads, "
                                      "--reps >= 1, --op all_reduce|all_gather|reduce_scatter";
  try {
    if (flags_ok) modes = parse_modes(o.modes);
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  auto probe = comm::world(comm::CommOptions{false, 0});  // rank, barriers, all-rank maxima
  Communicator& world = *probe;
  if (!error.empty()) throw InvalidArgument(error);  // printed once by main's handler
  const auto n = static_cast<size_t>(o.gemm_n);
  std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n, 0.0f);
  // --bytes counted as nccl-tests does: per rank (all-reduce), gathered, or scattered.
  const auto ranks = static_cast<size_t>(world.size());
  const size_t count = static_cast<size_t>(o.bytes) / 4 / ranks * ranks, block = count / ranks;
  std::vector<float> send(count, 1.0f), recv(count, 0.0f);
  const float tri = static_cast<float>(ranks * (ranks + 1) / 2);
  // Starts the collective under test over `c` (the world); inputs are rank + 1.
  auto start = [&](Communicator& c) {
    if (o.op == "all_gather") return c.all_gather_async(send.data(), recv.data(), block, DType::kF32);
    if (o.op == "reduce_scatter")
      return c.reduce_scatter_async(send.data(), recv.data(), block, DType::kF32);
    return c.all_reduce_async(send.data(), count, DType::kF32);
  };
  auto result_ok = [&] {
    const float first = o.op == "all_reduce" ? send[0] : recv[0];
    const float last = o.op == "all_reduce" ? send[count - 1] : o.op == "all_gather" ? recv[count - 1] : recv[block - 1];
    const float want_first = o.op == "all_gather" ? 1.0f : tri;
    const float want_last = o.op == "all_gather" ? static_cast<float>(ranks) : tri;
    return first == want_first && last == want_last;
  };
  const double flops = 2.0 * static_cast<double>(n * n * n);

  // Warm-up of the computation.
  compute(A, B, C, o.gemm_n, o.threads);  // warm-up
  // One communicator (and progress thread, for thread modes) per mode, all alive at once: every
  // repetition measures the computation alone and then each mode in turn, so that load from other
  // processes drifting over time hits every column alike (this machine is shared).
  struct Samples {
    std::vector<double> comm, issue, gemm, wait, total;
    int done_at_end = 0;
  };
  std::vector<std::shared_ptr<Communicator>> comms;
  for (const Mode& m : modes) {
    comms.push_back(comm::world(m.options));
    start(*comms.back())->wait();  // warm-up
  }
  std::vector<double> gemm_times;
  std::vector<Samples> samples(modes.size());
  int wrong = 0;
  for (int r = 0; r < o.reps; ++r) {
    world.barrier();
    Timer t0;
    compute(A, B, C, o.gemm_n, o.threads);
    gemm_times.push_back(max_over(world, t0.seconds()));
    for (size_t k = 0; k < modes.size(); ++k) {
      Communicator& c = *comms[k];
      Samples& s = samples[k];
      // The collective alone, issued and waited at once: the same MPI algorithm as overlapped.
      std::fill(send.begin(), send.end(), 1.0f);
      c.barrier();
      Timer t1;
      start(c)->wait();
      s.comm.push_back(max_over(world, t1.seconds()));
      // Issued, then the computation, then wait().
      std::fill(send.begin(), send.end(), static_cast<float>(c.rank() + 1));
      std::fill(recv.begin(), recv.end(), 0.0f);
      c.barrier();
      Timer t;
      auto w = start(c);  // over world
      const double t_issue = t.seconds();
      compute(A, B, C, o.gemm_n, o.threads);
      const double t_gemm = t.seconds();
      const bool done = w->test();
      w->wait();
      const double t_total = t.seconds();
      s.issue.push_back(max_over(world, t_issue));
      s.gemm.push_back(max_over(world, t_gemm - t_issue));
      s.wait.push_back(max_over(world, t_total - t_gemm));
      s.total.push_back(max_over(world, t_total));
      s.done_at_end += static_cast<int>(sum_over(world, done ? 1 : 0));
      wrong += static_cast<int>(sum_over(world, result_ok() ? 0 : 1));
    }
  }
  const double gemm_alone = median(gemm_times);
  if (world.rank() == 0) {
    std::printf("# axonn bench overlap: %d ranks; %s of %zu B f32 issued non-blocking, then "
                "a %dx%dx%d fp32 matmul on %d thread(s) per rank (%.2f GFLOP/s alone), then wait()\n",
                world.size(), o.op.c_str(), count * 4, o.gemm_n, o.gemm_n, o.gemm_n,
                o.threads, flops / gemm_alone * 1e-9);
    std::printf("# times in ms, median of %d reps of the max over ranks; hidden = share of the "
                "collective's time that the overlap saved: (comm + compute - total) / comm\n",
                o.reps);
    std::printf("# comm, compute: each alone; then issue (the *_async call), compute|ovl "
                "(the same computation, collective in flight), wait after (wait() once computed), "
                "total; done@end: test() true right after the computation (rank-reps)\n");
    std::printf("# %-12s %9s %9s %7s %12s %11s %9s %9s %8s\n", "mode", "comm", "compute", "issue",
                "compute|ovl", "wait after", "total", "done@end", "hidden");
    for (size_t k = 0; k < modes.size(); ++k) {
      const Samples& s = samples[k];
      const double comm_alone = median(s.comm), total = median(s.total);
      const double hidden = (comm_alone + gemm_alone - total) / comm_alone;
      std::printf("  %-12s %9.2f %9.2f %7.2f %12.2f %11.2f %9.2f %5d/%-3d %7.0f%%\n",
                  modes[k].name.c_str(), comm_alone * 1e3, gemm_alone * 1e3, median(s.issue) * 1e3,
                  median(s.gemm) * 1e3, median(s.wait) * 1e3, total * 1e3, s.done_at_end,
                  o.reps * world.size(), 100 * hidden);
    }
    std::fflush(stdout);
  }
  if (world.rank() == 0 && wrong) std::printf("# FAILED: %d wrong results\n", wrong);
  return wrong == 0 ? 0 : 1;
}


}  // namespace axonn::measure
