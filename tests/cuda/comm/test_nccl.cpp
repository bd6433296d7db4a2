// The NCCL communicator on device buffers, over real MPI ranks (one GPU each). Every test first
// agrees over MPI whether each rank has a device of its own; if not, every rank skips it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/nccl.hpp"
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

// "" when every rank of the job has a GPU of its own (then this rank's device is selected by its
// node-local rank); otherwise why not, the same on every rank.
std::string no_gpu_per_rank() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const std::string why = axonn::test::no_gpu_reason();
  int devices = 0;
  if (why.empty()) cudaGetDeviceCount(&devices);
  int short_of = devices < local_size ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &short_of, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (short_of != 0)
    return "some node has fewer GPUs than ranks (this one: " + std::to_string(devices) + " for " +
           std::to_string(local_size) + " ranks" + (why.empty() ? "" : "; " + why) +
           "); NCCL needs one device per rank";
  cudaSetDevice(local_rank);
  return "";
}

#define REQUIRE_GPU_PER_RANK()                                            \
  do {                                                                    \
    const std::string why_ = no_gpu_per_rank();                           \
    if (!why_.empty()) GTEST_SKIP() << "no GPU per rank: " << why_;       \
  } while (0)

struct Ranks {
  std::shared_ptr<Communicator> world = axonn::comm::world();
  std::shared_ptr<Communicator> gpu = axonn::comm::nccl_from(*world);
  int r = gpu->rank(), n = gpu->size();
};

}  // namespace

TEST(Nccl, AllReduceSumAvgMaxInF32AndBf16) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  const size_t count = 1001;
  Vec x(count);
  for (size_t i = 0; i < count; i++) x[i] = static_cast<float>(g.r + 1) + 0.001f * static_cast<float>(i);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    DeviceArray<float> d(x);
    g.gpu->all_reduce(d.get(), count, DType::kF32, op);
    const Vec got = d.host();
    for (size_t i = 0; i < count; i += 97) {
      const double extra = 0.001 * static_cast<double>(i);
      const double sum = g.n * (g.n + 1) / 2.0 + g.n * extra;
      const double want = op == ReduceOp::kSum ? sum : op == ReduceOp::kAvg ? sum / g.n : g.n + extra;
      EXPECT_NEAR(got[i], want, 1e-3) << axonn::comm::reduce_op_name(op) << " at " << i;
    }
  }
  // bf16: small integers are exact
  std::vector<uint16_t> h(count, axonn::f32_to_bf16(static_cast<float>(g.r + 1)));
  DeviceArray<uint16_t> d(h);
  g.gpu->all_reduce(d.get(), count, DType::kBF16);
  EXPECT_EQ(axonn::bf16_to_f32(d.host()[count - 1]), static_cast<float>(g.n * (g.n + 1) / 2));
}

TEST(Nccl, OrderedAfterTheKernelsThatProduceTheBuffer) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  const size_t count = 1 << 20;
  DeviceArray<float> a(Vec(count, 1.0f)), b(Vec(count, static_cast<float>(g.r))), out(count);
  // Queued on the compute stream, not waited: the all-reduce must still see a + b.
  axonn::kernels::cuda::residual_forward(out.get(), a.get(), b.get(), static_cast<int64_t>(count));
  auto work = g.gpu->all_reduce_async(out.get(), count, DType::kF32);
  while (!work->test()) {
  }
  work->wait();
  work->wait();  // waiting again is harmless
  EXPECT_EQ(out.host()[count - 1], static_cast<float>(g.n + g.n * (g.n - 1) / 2));
}

// Work::wait_on: the compute stream waits for the collective on the device; a kernel queued after it
// reads the reduced buffer. The buffer is large (64 MiB) so the collective is still running when the
// kernel is queued: without the device-side wait the kernel would read the inputs.
TEST(Nccl, KernelsQueuedAfterWaitOnSeeTheResult) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  const size_t count = size_t{1} << 24;
  const float want = static_cast<float>(g.n * (g.n + 1));  // 2 * (1 + 2 + ... + n)
  for (void* stream : {axonn::kernels::cuda_compute_stream(), static_cast<void*>(nullptr)}) {
    DeviceArray<float> x(Vec(count, static_cast<float>(g.r + 1))), y(count);
    auto work = g.gpu->all_reduce_async(x.get(), count, DType::kF32);
    work->wait_on(stream);  // nullptr: the communicator's compute stream, the same one
    axonn::kernels::cuda::residual_forward(y.get(), x.get(), x.get(), static_cast<int64_t>(count));
    work.reset();  // after wait_on, destroying the Work does not wait on the host
    const Vec got = y.host();
    EXPECT_EQ(got[0], want);
    EXPECT_EQ(got[count / 2], want);
    EXPECT_EQ(got[count - 1], want);
  }
}

TEST(Nccl, AllGatherReduceScatterBroadcast) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  const size_t count = 37;
  const auto N = static_cast<size_t>(g.n), R = static_cast<size_t>(g.r);
  Vec mine(count), all(count * N);
  for (size_t i = 0; i < count; i++) mine[i] = static_cast<float>(100 * g.r) + static_cast<float>(i);
  for (size_t r = 0; r < N; r++)
    for (size_t i = 0; i < count; i++) all[r * count + i] = static_cast<float>(100 * r + i);
  // out of place, then in place
  DeviceArray<float> send(mine), recv(count * N);
  g.gpu->all_gather(send.get(), recv.get(), count, DType::kF32);
  EXPECT_EQ(recv.host(), all);
  Vec seeded(count * N, -1.0f);
  for (size_t i = 0; i < count; i++) seeded[R * count + i] = mine[i];
  DeviceArray<float> inplace(seeded);
  g.gpu->all_gather(inplace.get() + R * count, inplace.get(), count, DType::kF32);
  EXPECT_EQ(inplace.host(), all);
  // reduce-scatter of `all` from every rank: block r summed n times
  DeviceArray<float> rs_send(all), rs_recv(count);
  g.gpu->reduce_scatter(rs_send.get(), rs_recv.get(), count, DType::kF32);
  const Vec rs = rs_recv.host();
  for (size_t i = 0; i < count; i++) EXPECT_EQ(rs[i], static_cast<float>(g.n) * all[R * count + i]);
  // broadcast from the last rank
  DeviceArray<float> bc(mine);
  g.gpu->broadcast(bc.get(), count, DType::kF32, g.n - 1);
  EXPECT_EQ(bc.host()[5], static_cast<float>(100 * (g.n - 1) + 5));
}

TEST(Nccl, VariableBlocksAndAllToAll) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  const auto N = static_cast<size_t>(g.n), R = static_cast<size_t>(g.r);
  axonn::test::expect_gather_v_and_all_to_all(*g.gpu);  // (tests/cuda/common)
  // all_to_all_v: rank r sends j elements to rank j (none to rank 0), valued 10 r + j
  std::vector<size_t> sc(N), rc(N, R);
  std::vector<float> s, w;
  for (size_t j = 0; j < N; j++) {
    sc[j] = j;
    s.insert(s.end(), j, static_cast<float>(10 * R + j));
    w.insert(w.end(), R, static_cast<float>(10 * j + R));
  }
  DeviceArray<float> s_dev(s.empty() ? Vec(1) : s), r_dev(w.empty() ? 1 : w.size());
  g.gpu->all_to_all_v(s_dev.get(), sc, r_dev.get(), rc, DType::kF32);
  Vec got = r_dev.host();
  got.resize(w.size());
  EXPECT_EQ(got, w);
}

TEST(Nccl, SplitDupBarrierAndGroupsOfOne) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  auto half = g.gpu->split(g.r % 2, g.r, "half");
  auto twin = g.gpu->dup("twin");
  auto alone = g.gpu->split(g.r, 0, "alone");
  auto none = g.gpu->split(-1, 0, "none");
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(half->size(), (g.n + 1 - g.r % 2) / 2);
  EXPECT_EQ(twin->size(), g.n);
  EXPECT_EQ(alone->size(), 1);
  DeviceArray<float> x(Vec(8, 1.0f));
  half->all_reduce(x.get(), 8, DType::kF32);
  twin->all_reduce(x.get(), 8, DType::kF32);
  const int h0 = (g.n + 1) / 2, h1 = g.n / 2;  // the two halves' sizes: each rank holds its own
  EXPECT_EQ(x.host()[7], static_cast<float>(h0 * h0 + h1 * h1));
  twin->barrier();
  g.gpu->barrier_async()->wait();
  // A group of one copies on the device instead of communicating.
  DeviceArray<float> src(Vec{1, 2, 3}), dst(3);
  alone->all_gather(src.get(), dst.get(), 3, DType::kF32);
  EXPECT_EQ(dst.host(), (Vec{1, 2, 3}));
  DeviceArray<float> dst2(3);
  alone->reduce_scatter(src.get(), dst2.get(), 3, DType::kF32);
  EXPECT_EQ(dst2.host(), (Vec{1, 2, 3}));
}

TEST(Nccl, RefusesWhatNcclCannotDo) {
  REQUIRE_GPU_PER_RANK();
  Ranks g;
  DeviceArray<uint16_t> u(std::vector<uint16_t>(4 * static_cast<size_t>(g.n), 7));
  if (g.n > 1) {  // a group of one never reaches NCCL
    EXPECT_THROW(g.gpu->all_reduce(u.get(), 4, DType::kU16), axonn::InvalidArgument);
  }
  // ... but moves u16 data
  DeviceArray<uint16_t> gathered(4 * static_cast<size_t>(g.n));
  g.gpu->all_gather(u.get(), gathered.get(), 4, DType::kU16);
  EXPECT_EQ(gathered.host()[0], 7);
  EXPECT_THROW(axonn::comm::nccl_from(*g.gpu), axonn::InvalidArgument);  // not from an NCCL communicator
}
