// Collective checks shared by the device communicators' tests (NCCL, MPI-staged): the variable-size
// and all-to-all collectives on device buffers, every rank of `gpu` calling alike.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/core/dtype.hpp"
#include "gpu_test.hpp"

namespace axonn::test {

// all_gather_v (rank r sends r + 2 int32 valued r) and all_to_all (block j of rank r holds 10 r + j).
inline void expect_gather_v_and_all_to_all(comm::Communicator& gpu) {
  const auto N = static_cast<size_t>(gpu.size()), R = static_cast<size_t>(gpu.rank());
  std::vector<size_t> counts(N);
  size_t total = 0;
  for (size_t r = 0; r < N; r++) total += counts[r] = r + 2;
  DeviceArray<int32_t> v_send(std::vector<int32_t>(counts[R], static_cast<int32_t>(R))), v_recv(total);
  gpu.all_gather_v(v_send.get(), counts[R], v_recv.get(), counts, DType::kI32);
  std::vector<int32_t> want;
  for (size_t r = 0; r < N; r++) want.insert(want.end(), counts[r], static_cast<int32_t>(r));
  EXPECT_EQ(v_recv.host(), want);
  const size_t block = 3;
  std::vector<int64_t> a2a(block * N), a2a_want(block * N);
  for (size_t j = 0; j < N; j++)
    for (size_t i = 0; i < block; i++) {
      a2a[j * block + i] = static_cast<int64_t>(10 * R + j);
      a2a_want[j * block + i] = static_cast<int64_t>(10 * j + R);
    }
  DeviceArray<int64_t> a_send(a2a), a_recv(block * N);
  gpu.all_to_all(a_send.get(), a_recv.get(), block, DType::kI64);
  EXPECT_EQ(a_recv.host(), a2a_want);
}

}  // namespace axonn::test
