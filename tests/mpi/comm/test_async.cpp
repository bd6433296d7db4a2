// Non-blocking collectives: several in flight on several communicators, waited out of order; the
// progress thread completing work while the caller makes no MPI call; the three progress modes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"

namespace axonn::comm {
namespace {

class ProgressModes : public testing::TestWithParam<CommOptions> {};

std::string mode_name(const testing::TestParamInfo<CommOptions>& info) {
  if (!info.param.progress_thread) return "NoThread";
  return "Thread_poll" + std::to_string(info.param.poll_interval_us) + "us";
}

TEST_P(ProgressModes, ManyInFlightWaitedOutOfOrder) {
  auto world_comm = world(GetParam());
  Communicator& w = *world_comm;
  const int n = w.size(), r = w.rank();
  // Two more communicators: the ranks of one parity (reversed), and a duplicate of the world.
  auto parity = w.split(r % 2, -r, "parity");
  auto twin = w.dup("twin");
  const int pn = parity->size();

  const size_t big = 200000, small = 1000;
  std::vector<float> a(big);                                         // all-reduce, world
  std::vector<int64_t> g_send(small), g_recv(small * size_t(n));     // all-gather, twin
  std::vector<int32_t> rs_send(small * size_t(pn)), rs_recv(small);  // reduce-scatter, parity
  std::vector<float> avg(small);                                     // all-reduce avg, twin
  std::vector<int32_t> bc(small);                                    // broadcast, parity
  for (size_t i = 0; i < big; ++i) a[i] = float(r + 1) * float(i % 4);
  for (size_t i = 0; i < small; ++i) g_send[i] = int64_t(r) * 1000000 + int64_t(i);
  for (size_t i = 0; i < rs_send.size(); ++i) rs_send[i] = int32_t(i % small) + 1;
  for (size_t i = 0; i < small; ++i) avg[i] = float(r) * 2.0f;
  for (size_t i = 0; i < small; ++i) bc[i] = parity->rank() == 0 ? int32_t(i) * 3 + r : -1;
  const int bc_root_world = r % 2 == 0 ? ((n - 1) / 2) * 2 : ((n - 2) / 2) * 2 + 1;  // parity rank 0

  std::vector<std::unique_ptr<Work>> works;
  works.push_back(w.all_reduce_async(a.data(), big, DType::kF32));
  works.push_back(twin->all_gather_async(g_send.data(), g_recv.data(), small, DType::kI64));
  works.push_back(parity->reduce_scatter_async(rs_send.data(), rs_recv.data(), small, DType::kI32));
  works.push_back(twin->all_reduce_async(avg.data(), small, DType::kF32, ReduceOp::kAvg));
  works.push_back(parity->broadcast_async(bc.data(), small, DType::kI32, 0));
  works.push_back(w.barrier_async());
  // Poll one until it completes, then wait the rest last-issued first.
  while (!works[3]->test()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (auto& work : works) EXPECT_TRUE(work->test());

  int bad = 0;
  const float tri = float(n) * float(n + 1) / 2;
  for (size_t i = 0; i < big; ++i) bad += a[i] != tri * float(i % 4);
  EXPECT_EQ(bad, 0) << "all_reduce";
  bad = 0;
  for (size_t k = 0; k < g_recv.size(); ++k)
    bad += g_recv[k] != int64_t(k / small) * 1000000 + int64_t(k % small);
  EXPECT_EQ(bad, 0) << "all_gather";
  bad = 0;
  for (size_t i = 0; i < small; ++i) bad += rs_recv[i] != pn * (int32_t(i) + 1);
  EXPECT_EQ(bad, 0) << "reduce_scatter";
  bad = 0;
  for (size_t i = 0; i < small; ++i) bad += avg[i] != float(n - 1);
  EXPECT_EQ(bad, 0) << "all_reduce avg";
  bad = 0;
  for (size_t i = 0; i < small; ++i) bad += bc[i] != int32_t(i) * 3 + bc_root_world;
  EXPECT_EQ(bad, 0) << "broadcast";
}

TEST_P(ProgressModes, WorkDestroyedUnwaitedStillCompletes) {
  auto c = world(GetParam());
  std::vector<float> v(50000, 1.0f);
  { auto dropped = c->all_reduce_async(v.data(), v.size(), DType::kF32); }
  int bad = 0;
  for (float x : v) bad += x != float(c->size());
  EXPECT_EQ(bad, 0);
}

TEST_P(ProgressModes, BlockingBetweenAsyncOnOneCommunicator) {
  // Blocking and non-blocking collectives interleaved on one communicator, in the same order on
  // every rank, as MPI allows.
  auto c = world(GetParam());
  std::vector<int32_t> x(3000, 1), y(3000, 2), z(3000, 3);
  auto wx = c->all_reduce_async(x.data(), x.size(), DType::kI32);
  c->all_reduce(y.data(), y.size(), DType::kI32);
  auto wz = c->all_reduce_async(z.data(), z.size(), DType::kI32, ReduceOp::kMax);
  wz->wait();
  wx->wait();
  const int n = c->size();
  EXPECT_EQ(std::count(x.begin(), x.end(), n), 3000);
  EXPECT_EQ(std::count(y.begin(), y.end(), 2 * n), 3000);
  EXPECT_EQ(std::count(z.begin(), z.end(), 3), 3000);
}

INSTANTIATE_TEST_SUITE_P(Modes, ProgressModes,
                         testing::Values(CommOptions{true, 50}, CommOptions{true, 0},
                                         CommOptions{false, 50}),
                         mode_name);

TEST(ProgressThread, CompletesWhileTheCallerMakesNoMpiCall) {
  // With the progress thread, test() only reads a flag: if it turns true, the collective was
  // driven to completion by the progress thread while this thread slept.
  auto c = world(CommOptions{true, 50});
  std::vector<float> v(1 << 20, 1.0f);
  auto w = c->all_reduce_async(v.data(), v.size(), DType::kF32);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool done = false;
  while (!(done = w->test()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(done);
  w->wait();
  EXPECT_EQ(v[12345], float(c->size()));
}

}  // namespace
}  // namespace axonn::comm
