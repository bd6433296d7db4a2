// core/memory.hpp — where a buffer's bytes live (host or device) and how to move them.
//
// The model runs the same code on both backends; only the memory differs. Everything that touches
// activation or parameter memory other than a kernel (allocation, zeroing, copies, reading the loss)
// goes through the MemoryOps of the buffer's Device: host memory is malloc/memcpy/memset; device
// memory is whatever the CUDA library registered (one cudaMalloc per allocation, never managed
// memory; cudaMemset/cudaMemcpy on the kernels' stream, so copies and kernels run in issue order).
// The CPU-only libraries never link CUDA: without a registration, asking for device memory is an
// InvalidArgument that says to build with -DAXONN_CUDA=ON.
//
//   const MemoryOps& mem = memory_for(Device::kCuda);   // after kernels::cuda_setup()
//   void* p = mem.allocate(bytes);                      // zero-filled
//   mem.upload(p, host_data, bytes);
//   mem.download(host_out, p, bytes);                   // waits for the kernels queued before
//   mem.release(p);
#pragma once

#include <cstddef>

#include "axonn/core/dtype.hpp"

namespace axonn {

struct MemoryOps {
  Device device;
  // Zero-filled allocation of `bytes` (> 0), aligned to at least 64 bytes; throws when out of memory.
  void* (*allocate)(size_t bytes);
  void (*release)(void* p) noexcept;
  // p[0, bytes) = 0, after the work already queued (device: asynchronous on the kernels' stream).
  void (*zero)(void* p, size_t bytes);
  // Within this memory; may be asynchronous on the kernels' stream. Ranges must not overlap.
  void (*copy)(void* dst, const void* src, size_t bytes);
  // `rows` rows of `width` bytes, from src (rows `src_pitch` bytes apart) to dst (`dst_pitch` apart).
  void (*copy_2d)(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);
  // Host memory -> this memory; the host buffer may be reused on return.
  void (*upload)(void* dst, const void* host_src, size_t bytes);
  // This memory -> host memory, complete on return (after every kernel queued before it).
  void (*download)(void* host_dst, const void* src, size_t bytes);
  // Returns when every kernel and copy queued so far has finished (host: at once). For timing.
  void (*synchronize)();
};

// malloc/memcpy/memset.
const MemoryOps& host_memory();
// host_memory() for Device::kCpu; the registered device memory for Device::kCuda (InvalidArgument
// when none was registered: a CPU-only build, or kernels::cuda_setup() not called).
const MemoryOps& memory_for(Device device);
// Called by the CUDA library (kernels::cuda_setup); `ops` must outlive the process's use of it.
void register_device_memory(const MemoryOps* ops);
bool device_memory_registered();

// A growable buffer of one memory kind: one allocation, replaced (contents dropped, zero-filled)
// when a larger size is asked for. For the communication buffers that are not arena slices.
class MemoryBuffer {
 public:
  explicit MemoryBuffer(const MemoryOps& memory = host_memory()) : mem_(&memory) {}
  ~MemoryBuffer() { reset(); }
  MemoryBuffer(MemoryBuffer&& o) noexcept : mem_(o.mem_), p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  MemoryBuffer& operator=(MemoryBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      mem_ = o.mem_;
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  MemoryBuffer(const MemoryBuffer&) = delete;
  MemoryBuffer& operator=(const MemoryBuffer&) = delete;

  // At least `bytes`; a new zero-filled allocation when the current one is smaller.
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    reset();
    p_ = mem_->allocate(bytes);
    bytes_ = bytes;
  }
  float* f32() const { return static_cast<float*>(p_); }
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  const MemoryOps& memory() const { return *mem_; }

 private:
  void reset() noexcept {
    if (p_) mem_->release(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  const MemoryOps* mem_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace axonn
