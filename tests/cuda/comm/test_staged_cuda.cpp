// The MPI-staged communicator with the CUDA copier, on device buffers, over real MPI ranks that may
// share one GPU (that is what it is for); device selection by node-local rank; the compute stream.
// Every test first agrees over MPI whether every rank has a device; if not, every rank skips it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "axonn/comm/cuda.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/cuda.hpp"
#include "axonn/kernels/ops.hpp"
#include "device_collectives.hpp"
#include "gpu_test.hpp"

using axonn::DType;
using axonn::comm::Communicator;
using axonn::comm::ReduceOp;
using axonn::test::DeviceArray;
using Vec = std::vector<float>;

namespace {

// "" when every rank sees a device (this rank's is then selected by its node-local rank); otherwise
// why not, the same on every rank.
std::string no_gpu_anywhere() {
  const std::string why = axonn::test::no_gpu_reason();
  int missing = why.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &missing, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (missing != 0) return why.empty() ? "another rank has no CUDA device" : why;
  axonn::comm::select_device_by_local_rank();
  return "";
}

#define REQUIRE_GPU_ON_EVERY_RANK()                                         \
  do {                                                                      \
    const std::string why_ = no_gpu_anywhere();                             \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA device: " << why_;          \
  } while (0)

struct Ranks {
  std::shared_ptr<Communicator> world = axonn::comm::world();
  std::shared_ptr<Communicator> gpu = axonn::comm::staged_cuda_from(world);
  int r = gpu->rank(), n = gpu->size();
};

}  // namespace

TEST(StagedCuda, DeviceSelectionFollowsTheNodeLocalRank) {
  (void)axonn::comm::local_rank();  // collective the first time: every rank, before any branch
  if (!axonn::test::no_gpu_reason().empty()) {
    // No device on this rank: selecting one is a clear error, not a crash or a silent device 0.
    try {
      axonn::comm::select_device_by_local_rank();
      ADD_FAILURE() << "select_device_by_local_rank() returned without a device";
    } catch (const axonn::CudaError& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device visible"), std::string::npos) << e.what();
    }
  }
  REQUIRE_GPU_ON_EVERY_RANK();
  int count = 0, current = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const int selected = axonn::comm::select_device_by_local_rank();
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(selected, axonn::comm::local_rank() % count);
  EXPECT_EQ(current, selected);
}

TEST(StagedCuda, ComputeStreamIsOnePerDeviceNonBlockingAndSharedByThreads) {
  REQUIRE_GPU_ON_EVERY_RANK();
  void* s = axonn::kernels::cuda_compute_stream();
  ASSERT_NE(s, nullptr);  // never the legacy default stream
  EXPECT_EQ(axonn::kernels::cuda_compute_stream(), s);
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(static_cast<cudaStream_t>(s), &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  void* other = nullptr;
  std::thread t([&] {
    if (cudaSetDevice(device) == cudaSuccess) other = axonn::kernels::cuda_compute_stream();
  });
  t.join();
  EXPECT_EQ(other, s);
}

TEST(StagedCuda, AllReduceAfterTheKernelsThatProduceTheBuffer) {
  REQUIRE_GPU_ON_EVERY_RANK();
  Ranks g;
  const size_t count = (1 << 20) + 3;
  DeviceArray<float> a(Vec(count, 1.0f)), b(Vec(count, static_cast<float>(g.r))), out(count), twice(count);
  // Queued on the compute stream and not waited: the staged copy to the host must come after it.
  axonn::kernels::cuda::residual_forward(out.get(), a.get(), b.get(), static_cast<int64_t>(count));
  auto work = g.gpu->all_reduce_async(out.get(), count, DType::kF32);
  work->wait();
  // A kernel queued after wait() sees the result.
  axonn::kernels::cuda::residual_forward(twice.get(), out.get(), out.get(), static_cast<int64_t>(count));
  const float want = static_cast<float>(g.n + g.n * (g.n - 1) / 2);
  const Vec got = twice.host();
  EXPECT_EQ(got[0], 2 * want);
  EXPECT_EQ(got[count - 1], 2 * want);
  // blocking, avg and max, and bf16
  DeviceArray<float> x(Vec(1000, static_cast<float>(g.r + 1)));
  g.gpu->all_reduce(x.get(), 1000, DType::kF32, ReduceOp::kMax);
  EXPECT_EQ(x.host()[999], static_cast<float>(g.n));
  g.gpu->all_reduce(x.get(), 1000, DType::kF32, ReduceOp::kAvg);
  EXPECT_EQ(x.host()[0], static_cast<float>(g.n));
  DeviceArray<uint16_t> h(std::vector<uint16_t>(77, axonn::f32_to_bf16(static_cast<float>(g.r + 1))));
  g.gpu->all_reduce(h.get(), 77, DType::kBF16);
  EXPECT_EQ(axonn::bf16_to_f32(h.host()[76]), static_cast<float>(g.n * (g.n + 1) / 2));
}

TEST(StagedCuda, EveryOtherCollective) {
  REQUIRE_GPU_ON_EVERY_RANK();
  Ranks g;
  const auto N = static_cast<size_t>(g.n), R = static_cast<size_t>(g.r);
  const size_t count = 37;
  Vec mine(count), all(count * N);
  for (size_t i = 0; i < count; i++) mine[i] = static_cast<float>(100 * R + i);
  for (size_t r = 0; r < N; r++)
    for (size_t i = 0; i < count; i++) all[r * count + i] = static_cast<float>(100 * r + i);
  DeviceArray<float> send(mine), recv(count * N);
  g.gpu->all_gather(send.get(), recv.get(), count, DType::kF32);
  EXPECT_EQ(recv.host(), all);
  DeviceArray<float> rs_send(all), rs_recv(count);
  g.gpu->reduce_scatter_async(rs_send.get(), rs_recv.get(), count, DType::kF32)->wait();
  const Vec rs = rs_recv.host();
  for (size_t i = 0; i < count; i++) EXPECT_EQ(rs[i], static_cast<float>(g.n) * all[R * count + i]);
  DeviceArray<float> bc(mine);
  g.gpu->broadcast(bc.get(), count, DType::kF32, g.n - 1);
  EXPECT_EQ(bc.host()[5], static_cast<float>(100 * (g.n - 1) + 5));
  axonn::test::expect_gather_v_and_all_to_all(*g.gpu);  // (tests/cuda/common)
  g.gpu->barrier();
}

TEST(StagedCuda, SeveralInFlightAndGroupsOfOne) {
  REQUIRE_GPU_ON_EVERY_RANK();
  Ranks g;
  const size_t count = 4096;
  std::vector<DeviceArray<float>> bufs;
  for (int j = 0; j < 3; ++j) bufs.emplace_back(Vec(count, static_cast<float>(j + 1)));
  std::vector<std::unique_ptr<axonn::comm::Work>> works;
  for (auto& b : bufs) works.push_back(g.gpu->all_reduce_async(b.get(), count, DType::kF32));
  for (size_t j = works.size(); j-- > 0;) works[j]->wait_on(axonn::kernels::cuda_compute_stream());  // = wait()
  for (size_t j = 0; j < bufs.size(); ++j)
    EXPECT_EQ(bufs[j].host()[count - 1], static_cast<float>((j + 1) * static_cast<size_t>(g.n))) << "collective " << j;
  auto alone = g.gpu->split(g.r, 0, "alone");
  auto twin = g.gpu->dup("twin");
  DeviceArray<float> src(Vec{1, 2, 3}), dst(3);
  alone->all_gather(src.get(), dst.get(), 3, DType::kF32);  // a device copy on the compute stream
  EXPECT_EQ(dst.host(), (Vec{1, 2, 3}));
  twin->all_reduce(src.get(), 3, DType::kF32);
  EXPECT_EQ(src.host()[2], static_cast<float>(3 * g.n));
}
