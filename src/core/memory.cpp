// core/memory.cpp — host memory, and the registration point of device memory.
#include "axonn/core/memory.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "axonn/core/error.hpp"

namespace axonn {

namespace {

constexpr size_t kAlign = 64;

void* host_allocate(size_t bytes) {
  const size_t n = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, n ? n : kAlign);
  if (!p)
    throw Error("out of host memory allocating " + std::to_string(bytes >> 20) +
                " MiB; reduce --batch-size or --seq-len, or use more ranks");
  std::memset(p, 0, n ? n : kAlign);
  return p;
}
void host_release(void* p) noexcept { std::free(p); }
void host_zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
void host_copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void host_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t r = 0; r < rows; r++) std::memcpy(d + r * dst_pitch, s + r * src_pitch, width);
}

void host_synchronize() {}

const MemoryOps kHost{Device::kCpu, host_allocate, host_release, host_zero,        host_copy,
                      host_copy_2d, host_copy,    host_copy,    host_synchronize};
std::atomic<const MemoryOps*> g_device{nullptr};

}  // namespace

const MemoryOps& host_memory() { return kHost; }

const MemoryOps& memory_for(Device device) {
  if (device == Device::kCpu) return kHost;
  const MemoryOps* d = g_device.load();
  if (!d)
    throw InvalidArgument(
        "device memory is not available: this build has no CUDA backend (rebuild with -DAXONN_CUDA=ON), "
        "or kernels::cuda_setup() was not called; use --kernels cpu to run on the host");
  return *d;
}

void register_device_memory(const MemoryOps* ops) {
  AXONN_CHECK(ops && ops->device == Device::kCuda, "register_device_memory needs device memory operations");
  g_device.store(ops);
}

bool device_memory_registered() { return g_device.load() != nullptr; }

}  // namespace axonn
