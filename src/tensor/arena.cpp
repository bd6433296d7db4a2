#include "axonn/tensor/arena.hpp"

#include <cstdlib>
#include <cstring>

namespace axonn {

namespace {
constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

void Arena::Free::operator()(void* p) const { std::free(p); }

size_t Arena::reserve(std::string name, Shape shape, DType dtype) {
  AXONN_CHECK(!allocated(), "arena '", name_, "' is already allocated; cannot reserve '", name, "'");
  size_t offset = bytes_;
  size_t nbytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  slots_.push_back(Slot{std::move(name), shape, dtype, offset});
  bytes_ = align_up(offset + nbytes);
  return slots_.size() - 1;
}

Arena Arena::clone_layout(std::string name) const {
  Arena a(std::move(name));
  for (const Slot& s : slots_) a.reserve(s.name, s.shape, s.dtype);
  return a;
}

void Arena::allocate() {
  AXONN_CHECK(!allocated(), "arena '", name_, "' allocated twice");
  size_t n = bytes_ ? bytes_ : kAlign;
  void* p = std::aligned_alloc(kAlign, n);
  if (!p)
    throw Error("out of memory allocating " + std::to_string(n >> 20) + " MiB for " + name_ +
                "; reduce --batch-size or --seq-len, or use more ranks");
  std::memset(p, 0, n);
  storage_.reset(static_cast<char*>(p));
}

void Arena::zero() {
  if (allocated()) std::memset(storage_.get(), 0, bytes_);
}

Tensor Arena::tensor(size_t slot) const {
  AXONN_CHECK(allocated(), "arena '", name_, "' is not allocated");
  AXONN_CHECK(slot < slots_.size(), "slot ", slot, " out of range in arena '", name_, "'");
  const Slot& s = slots_[slot];
  return Tensor(storage_.get() + s.offset, s.shape, s.dtype);
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
