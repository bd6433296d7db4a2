// 4D training with several ranks on the GPU equals one rank: every grid of the job's ranks (under
// mpiexec -n 2: X, Y, Z and data of 2) reproduces the losses of the same run on one rank. Several
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
#include "common/reference_run.hpp"

using namespace axonn;

namespace {

train::TrainConfig config(const std::string& comm, const std::string& grid) {
  train::TrainConfig c = test::reference_config();
  c.steps = 6;
  c.grad_clip = 1.0f;  // the grid-wide norm too
  c.kernels = "cuda";
  c.comm = comm;
  c.grid = grid;
  c.overlap = "all";
  return c;
}


}  // namespace

class GpuGrid : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuGrid, EqualsOneRank) {
  AXONN_REQUIRE_GPU();  // the same on every rank of one node
  const std::string comm = GetParam();
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
  const std::vector<train::StepMetrics> ref = train::train(config(comm, ""), alone);
  const int n = world->size();
  const std::vector<std::string> grids = {std::to_string(n) + ",1,1,1", "1," + std::to_string(n) + ",1,1",
                                          "1,1," + std::to_string(n) + ",1", "1,1,1," + std::to_string(n)};
  for (const std::string& g : grids) {
    const std::vector<train::StepMetrics> got = train::train(config(comm, g), world);
    EXPECT_EQ(got.size(), ref.size());
    double worst = 0;
    for (size_t i = 0; i < got.size() && i < ref.size(); i++) {
      EXPECT_NEAR(got[i].loss, ref[i].loss, 2e-4) << "grid " << g << " step " << i;
      EXPECT_NEAR(got[i].grad_norm, ref[i].grad_norm, 1e-3 * ref[i].grad_norm) << "grid " << g << " step " << i;
      worst = std::max(worst, static_cast<double>(std::fabs(got[i].loss - ref[i].loss)));
    }
    if (world->rank() == 0) std::printf("grid %s, comm %s: max |loss - one rank| = %.3g\n", g.c_str(), comm.c_str(), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Comm, GpuGrid, ::testing::Values("mpi-staged", "nccl"),
                         [](const auto& p) { return p.param == "mpi-staged" ? std::string("staged") : p.param; });
