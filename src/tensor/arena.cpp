#include "axonn/tensor/arena.hpp"

#include <cstdlib>
#include <cstring>

namespace axonn {

namespace {
constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

void Arena::Free::operator()(void* p) const { mem->release(p); }

size_t Arena::reserve(std::string name, Shape shape, DType dtype) {
  AXONN_CHECK(!allocated(), "arena '", name_, "' is already allocated; cannot reserve '", name, "'");
  size_t offset = bytes_;
  size_t nbytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  slots_.push_back(Slot{std::move(name), shape, dtype, offset});
  bytes_ = align_up(offset + nbytes);
  return slots_.size() - 1;
}

Arena Arena::clone_layout(std::string name) const { return clone_layout(std::move(name), device_); }

Arena Arena::clone_layout(std::string name, Device device) const {
  Arena a(std::move(name), device);
  for (const Slot& s : slots_) a.reserve(s.name, s.shape, s.dtype);
  return a;
}

Arena Arena::clone_layout(std::string name, Device device, DType dtype) const {
  Arena a(std::move(name), device);
  for (const Slot& s : slots_) a.reserve(s.name, s.shape, dtype);
  return a;
}

void Arena::allocate() {
  AXONN_CHECK(!allocated(), "arena '", name_, "' allocated twice");
  size_t n = bytes_ ? bytes_ : kAlign;
  const MemoryOps& mem = memory();  // device memory in a build without CUDA: InvalidArgument
  void* p = nullptr;
  try {
    p = mem.allocate(n);  // zero-filled
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    throw Error("out of " + std::string(device_ == Device::kCpu ? "" : "device ") + "memory allocating " +
                std::to_string(n >> 20) + " MiB for " + name_ + " (" + e.what() +
                "); reduce --batch-size or --seq-len, or use more ranks");
  }
  storage_ = std::unique_ptr<char, Free>(static_cast<char*>(p), Free{&mem});
}

void Arena::zero() {
  if (allocated()) memory().zero(storage_.get(), bytes_);
}

void Arena::copy_from(const Arena& src) {
  AXONN_CHECK(allocated() && src.allocated(), "copy between arenas '", src.name_, "' and '", name_,
              "' needs both allocated");
  AXONN_CHECK(bytes_ == src.bytes_ && slots_.size() == src.slots_.size(), "arena '", src.name_,
              "' does not have the layout of '", name_, "'");
  if (device_ == Device::kCpu && src.device_ == Device::kCpu)
    std::memcpy(storage_.get(), src.storage_.get(), bytes_);
  else if (device_ == Device::kCpu)
    src.memory().download(storage_.get(), src.storage_.get(), bytes_);
  else if (src.device_ == Device::kCpu)
    memory().upload(storage_.get(), src.storage_.get(), bytes_);
  else
    memory().copy(storage_.get(), src.storage_.get(), bytes_);
}

Tensor Arena::tensor(size_t slot) const {
  AXONN_CHECK(allocated(), "arena '", name_, "' is not allocated");
  AXONN_CHECK(slot < slots_.size(), "slot ", slot, " out of range in arena '", name_, "'");
  const Slot& s = slots_[slot];
  return Tensor(storage_.get() + s.offset, s.shape, s.dtype, device_);
}

Tensor Arena::tensor(std::string_view name) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].name == name) return tensor(i);
  throw Error("no tensor '" + std::string(name) + "' in arena '" + name_ + "'");
}

int64_t Arena::numel() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += s.shape.numel();
  return n;
}

}  // namespace axonn
