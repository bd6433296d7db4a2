// Host memory operations, device arenas and the cuda backend without CUDA set up: clear errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/memory.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/tensor/arena.hpp"

using namespace axonn;

TEST(Memory, HostOperations) {
  const MemoryOps& m = memory_for(Device::kCpu);
  EXPECT_EQ(m.device, Device::kCpu);
  auto* p = static_cast<float*>(m.allocate(sizeof(float) * 12));
  for (int i = 0; i < 12; i++) EXPECT_EQ(p[i], 0.0f) << "allocate must zero-fill";
  std::vector<float> src(12);
  for (int i = 0; i < 12; i++) src[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  m.upload(p, src.data(), sizeof(float) * 12);
  // columns 1..2 of a 4x3 matrix into a 4x2 one
  std::vector<float> cols(8, -1.0f);
  m.copy_2d(cols.data(), 2 * sizeof(float), p + 1, 3 * sizeof(float), 2 * sizeof(float), 4);
  EXPECT_EQ(cols, (std::vector<float>{2, 3, 5, 6, 8, 9, 11, 12}));
  m.zero(p + 4, sizeof(float) * 4);
  std::vector<float> back(12);
  m.download(back.data(), p, sizeof(float) * 12);
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0, 9, 10, 11, 12}));
  m.synchronize();
  m.release(p);
}

TEST(Memory, GrowableBuffer) {
  MemoryBuffer b;
  b.reserve(16);
  void* first = b.data();
  ASSERT_NE(first, nullptr);
  b.reserve(8);  // smaller: kept
  EXPECT_EQ(b.data(), first);
  b.reserve(4096);
  EXPECT_GE(b.bytes(), 4096u);
  EXPECT_EQ(b.f32()[1023], 0.0f);
}

TEST(Arena, CopyFromAnotherArenaWithTheSameLayout) {
  Arena a("a");
  a.reserve("x", {3, 5});
  a.reserve("y", {7});
  a.allocate();
  for (int i = 0; i < 15; i++) a.tensor(0).f32()[i] = static_cast<float>(i);
  a.tensor(1).f32()[6] = 42.0f;
  Arena b = a.clone_layout("b", Device::kCpu);
  EXPECT_EQ(b.device(), Device::kCpu);
  b.allocate();
  b.copy_from(a);
  EXPECT_EQ(b.tensor(0).f32()[14], 14.0f);
  EXPECT_EQ(b.tensor(1).f32()[6], 42.0f);
  Arena c("c");
  c.reserve("x", {3, 5});
  c.allocate();
  EXPECT_THROW(c.copy_from(a), Error);  // another layout
}

// Device memory and the cuda table exist only once kernels::cuda_setup() registered them (never in
// this test); until then both are errors that say what to do.
TEST(Memory, DeviceWithoutSetupIsAClearError) {
  ASSERT_FALSE(device_memory_registered());
  try {
    (void)memory_for(Device::kCuda);
    ADD_FAILURE() << "device memory without a registration";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("-DAXONN_CUDA=ON"), std::string::npos) << e.what();
  }
  Arena a("on the device", Device::kCuda);
  a.reserve("x", {4});
  EXPECT_THROW(a.allocate(), InvalidArgument);
  EXPECT_FALSE(a.allocated());
  EXPECT_EQ(kernels::parse_backend("cuda"), kernels::Backend::kCuda);
  EXPECT_EQ(kernels::backend_name(kernels::Backend::kCuda), "cuda");
  EXPECT_EQ(kernels::backend_device(kernels::Backend::kCuda), Device::kCuda);
  EXPECT_EQ(kernels::backend_device(kernels::Backend::kCpu), Device::kCpu);
  try {
    (void)kernels::ops_for(kernels::Backend::kCuda);
    ADD_FAILURE() << "the cuda table without a registration";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--kernels cpu"), std::string::npos) << e.what();
  }
}
