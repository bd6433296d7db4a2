// 4D training with several ranks on the GPU equals one rank: every grid of the job's ranks that gpt2-tiny
// admits (under mpiexec -n 2: X, Y, Z and data of 2; under -n 4 the 2D and 3D grids as well, e.g. 2,2,1,1
// and 2,1,2,1) reproduces the losses of the same run on one rank. Several
// ranks may share one GPU through the MPI-staged communicator (--comm mpi-staged); NCCL is tried too
// where every rank has a GPU of its own. Skipped (on every rank alike) when there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/train/trainer.hpp"
#include "gpu_test.hpp"
#include "common/grid_shapes.hpp"
#include "common/reference_run.hpp"

using namespace axonn;

namespace {

train::TrainConfig config(const std::string& comm, const std::string& grid, const std::string& dtype) {
  train::TrainConfig c = test::reference_config();
  c.dtype = dtype;
  c.steps = 6;
  c.grad_clip = 1.0f;  // the grid-wide norm too
  c.kernels = "cuda";
  c.comm = comm;
  c.grid = grid;
  c.overlap = "all";
  return c;
}
// Trains on one rank alone, then on each grid of the job's ranks, and compares the losses (within
// loss_tol, absolute) and gradient norms (norm_rel, relative) of every step.
void expect_grids_match_one_rank(const std::string& comm, const std::string& dtype, double loss_tol,
                                 double norm_rel) {
  auto world = comm::world();
  if (world->size() < 2) GTEST_SKIP() << "needs >= 2 ranks (mpiexec -n 2)";
  int devices = 0;
  (void)cudaGetDeviceCount(&devices);
  if (comm == "nccl" && devices < world->size())
    GTEST_SKIP() << "--comm nccl needs a GPU per rank (" << devices << " for " << world->size() << " ranks)";
#if !defined(AXONN_HAVE_NCCL)
  if (comm == "nccl") GTEST_SKIP() << "this build has no NCCL";
#endif
  // one rank alone first (every rank runs it on its own), then each grid over all ranks
  std::shared_ptr<comm::Communicator> alone = world->split(world->rank(), 0, "alone");
  const std::vector<train::StepMetrics> ref = train::train(config(comm, "", dtype), alone);
  for (const parallel::GridShape& shape : test::tiny_gpt2_grids(world->size())) {
    const std::string g = test::grid_text(shape);
    const std::vector<train::StepMetrics> got = train::train(config(comm, g, dtype), world);
    EXPECT_EQ(got.size(), ref.size());
    double worst = 0;
    for (size_t i = 0; i < got.size() && i < ref.size(); i++) {
      EXPECT_NEAR(got[i].loss, ref[i].loss, loss_tol) << "grid " << g << " step " << i;
      EXPECT_NEAR(got[i].grad_norm, ref[i].grad_norm, norm_rel * ref[i].grad_norm) << "grid " << g << " step " << i;
      worst = std::max(worst, static_cast<double>(std::fabs(got[i].loss - ref[i].loss)));
    }
    if (world->rank() == 0)
      std::printf("grid %s, comm %s, %s: max |loss - one rank| = %.3g\n", g.c_str(), comm.c_str(), dtype.c_str(),
                  worst);
  }
}

}  // namespace

class GpuGrid : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuGrid, EqualsOneRank) {
  AXONN_REQUIRE_GPU();  // the same on every rank of one node
  expect_grids_match_one_rank(GetParam(), "fp32", 2e-4, 1e-3);
}

// bf16 mixed precision: the grid's partial products are rounded to bf16 before their all-reduce; the bounds
// are the CPU bf16 grid test's (tests/mpi/model/test_gpt_grid.cpp: 1e-3 relative loss, 2e-2 relative norm).
TEST_P(GpuGrid, Bf16EqualsOneRank) {
  AXONN_REQUIRE_GPU();
  expect_grids_match_one_rank(GetParam(), "bf16", 6.5e-3, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Comm, GpuGrid, ::testing::Values("mpi-staged", "nccl"),
                         [](const auto& p) { return p.param == "mpi-staged" ? std::string("staged") : p.param; });
