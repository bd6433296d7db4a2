// tensor/arena.hpp — one allocation holding many named tensors (llm.c's pattern).
//
// Parameters, gradients, optimizer moments and activations each live in one Arena: reserve every
// tensor first, then allocate() once; views never move afterwards. Slices are 64-byte aligned so
// vector loops start on a cache line; the gaps are zero and stay zero. An arena lives in host
// memory or, for the CUDA kernels, in device memory (one cudaMalloc, core/memory.hpp); its tensors
// carry that Device, and memory() moves bytes in and out of it.
//
//   Arena params("params");
//   size_t wte = params.reserve("wte", {Vp, C});
//   params.allocate();
//   float* p = params.tensor(wte).f32();
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/core/memory.hpp"
#include "axonn/tensor/tensor.hpp"

namespace axonn {

class Arena {
 public:
  explicit Arena(std::string name, Device device = Device::kCpu) : name_(std::move(name)), device_(device) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) = default;
  Arena& operator=(Arena&&) = default;

  // Reserves a tensor; returns its slot. Only before allocate().
  size_t reserve(std::string name, Shape shape, DType dtype = DType::kF32);
  // Makes a new, unallocated arena with the same slots (gradients and moments mirror parameters),
  // in the same memory or in `device`'s.
  Arena clone_layout(std::string name) const;
  Arena clone_layout(std::string name, Device device) const;
  // The same slots with every element of type `dtype` (the bf16 copies of fp32 parameters).
  Arena clone_layout(std::string name, Device device, DType dtype) const;
  // One zero-filled allocation for all reserved tensors (device: InvalidArgument in a build without
  // CUDA).
  void allocate();
  void zero();
  // Copies every byte of `src`, an allocated arena with the same slots, whatever memory either is in
  // (a host copy of device parameters for a checkpoint, and back).
  void copy_from(const Arena& src);

  Device device() const { return device_; }
  const MemoryOps& memory() const { return memory_for(device_); }
  bool allocated() const { return storage_ != nullptr; }
  size_t size() const { return slots_.size(); }
  Tensor tensor(size_t slot) const;
  Tensor tensor(std::string_view name) const;
  const std::string& slot_name(size_t slot) const { return slots_[slot].name; }
  const std::string& name() const { return name_; }
  size_t bytes() const { return bytes_; }
  // Total elements over all slots (not counting alignment gaps).
  int64_t numel() const;

 private:
  struct Slot {
    std::string name;
    Shape shape;
    DType dtype;
    size_t offset;
  };
  struct Free {
    const MemoryOps* mem;  // set by allocate(); never called on a null pointer
    void operator()(void* p) const;
  };
  std::string name_;
  Device device_ = Device::kCpu;
  std::vector<Slot> slots_;
  size_t bytes_ = 0;
  std::unique_ptr<char, Free> storage_;
};

}  // namespace axonn
