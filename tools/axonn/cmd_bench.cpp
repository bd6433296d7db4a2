// axonn bench comm    — nccl-tests-style size sweep of the grid's collectives, values checked.
// axonn bench overlap — how much of a non-blocking all-reduce hides behind a long computation.
// Flags only; the benchmarks are the library's (measure/comm_bench.hpp).
//
// `bench` is a family: other benchmarks add their own sub-subcommand next to these.
#include <memory>

#include "axonn/measure/comm_bench.hpp"
#include "commands.hpp"

namespace axonn::tools {

void add_bench_command(CLI::App& app, Action* action) {
  auto* family = app.add_subcommand("bench", "benchmarks (comm, overlap)");
  family->require_subcommand(1);

  auto co = std::make_shared<measure::CommBenchOptions>();
  auto* c = family->add_subcommand("comm", "size sweep of all-reduce, all-gather and reduce-scatter "
                                          "over every group of the grid (nccl-tests style)");
  c->footer("Example:\n  mpirun -np 8 axonn bench comm --grid 2,2,2,1 --min-bytes 4096 --max-bytes 4194304");
  c->add_option("--grid", co->grid, "GX,GY,GZ,GD (default 1,1,1,<number of ranks>)");
  c->add_option("--grid-order", co->grid_order, "rank order of X, Y, Z, fastest first (default x,y,z)");
  c->add_option("--min-bytes", co->min_bytes, "smallest size in bytes")->capture_default_str();
  c->add_option("--max-bytes", co->max_bytes, "largest size in bytes")->capture_default_str();
  c->add_option("--step-factor", co->step_factor, "size multiplier between rows")->capture_default_str();
  c->add_option("--dtype", co->dtype, "fp32 or bf16")->capture_default_str();
  c->add_option("--warmup", co->warmup, "untimed calls per size")->capture_default_str();
  c->add_option("--iters", co->iters, "timed calls per size and round")->capture_default_str();
  c->add_option("--rounds", co->rounds, "timed rounds per size; the fastest is reported")
      ->capture_default_str();
  c->add_flag("--async", co->async, "time the non-blocking form (issue + wait)");
  c->callback([action, co] { *action = [co] { return measure::run_comm_bench(*co); }; });

  auto oo = std::make_shared<measure::OverlapOptions>();
  auto* ov = family->add_subcommand("overlap", "a non-blocking collective over the world issued "
                                              "before a long matmul: how much of it is hidden");
  ov->footer("Example:\n  mpirun -np 2 axonn bench overlap --op all_reduce");
  ov->add_option("--op", oo->op, "all_reduce, all_gather or reduce_scatter")->capture_default_str();
  ov->add_option("--bytes", oo->bytes, "size in bytes (f32; per rank, gathered or scattered)")
      ->capture_default_str();
  ov->add_option("--gemm-n", oo->gemm_n, "matmul size n (n x n x n)")->capture_default_str();
  ov->add_option("--threads", oo->threads, "compute threads per rank")->capture_default_str();
  ov->add_option("--reps", oo->reps, "repetitions per mode")->capture_default_str();
  ov->add_option("--modes", oo->modes, "progress modes: none | thread:<poll interval us>, "
                                       "comma-separated")->capture_default_str();
  ov->callback([action, oo] { *action = [oo] { return measure::run_overlap_bench(*oo); }; });
}

}  // namespace axonn::tools
