// launch::setup_compute: which kernels and communicators a run gets, and the errors for the
// combinations this build or job cannot run.
#include <gtest/gtest.h>

#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/launch/compute.hpp"

using namespace axonn;

namespace {
std::string error_of(const std::string& kernels, const std::string& comm) {
  try {
    (void)launch::setup_compute(kernels, comm, comm::world());
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Compute, CpuRunsOnTheMpiWorld) {
  auto world = comm::world();
  const launch::Compute c = launch::setup_compute("cpu", "", world);
  EXPECT_EQ(c.backend, kernels::Backend::kCpu);
  EXPECT_EQ(c.comm, "mpi");
  EXPECT_EQ(c.grid_world.get(), world.get());
  EXPECT_EQ(c.device, -1);
  EXPECT_EQ(launch::default_comm(kernels::Backend::kRef), "mpi");
}

TEST(Compute, RefusesWhatCannotRun) {
  EXPECT_NE(error_of("cpu", "nccl").find("--comm mpi"), std::string::npos);
  EXPECT_NE(error_of("cpu", "mpi-staged").find("--comm mpi"), std::string::npos);
  EXPECT_NE(error_of("cpu", "tcp").find("use mpi, nccl or mpi-staged"), std::string::npos);
  EXPECT_NE(error_of("gpu", "").find("use cpu, ref or cuda"), std::string::npos);
#if !AXONN_CUDA_BUILD
  // a CPU-only build says how to get the GPU backend
  EXPECT_NE(error_of("cuda", "").find("-DAXONN_CUDA=ON"), std::string::npos) << error_of("cuda", "");
  EXPECT_EQ(launch::default_comm(kernels::Backend::kCuda), "mpi");
#endif
}
