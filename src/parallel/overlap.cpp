#include "axonn/parallel/overlap.hpp"

#include <algorithm>
#include <cstring>

#include "axonn/core/error.hpp"

namespace axonn::parallel {

// --- Overlap ----------------------------------------------------------------------------------

Overlap parse_overlap(std::string_view text) {
  constexpr const char* kHelp = "--overlap takes none, all, or a comma-separated list of oar, ors, oag, dp";
  if (text == "none") return {};
  if (text == "all") return Overlap::all();
  AXONN_CHECK_ARG(!text.empty(), kHelp, "; got an empty value");
  Overlap o;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view word = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    bool* flag = word == "oar" ? &o.oar : word == "ors" ? &o.ors : word == "oag" ? &o.oag : word == "dp" ? &o.dp : nullptr;
    AXONN_CHECK_ARG(word != "none" && word != "all", kHelp, "; '", word, "' cannot be combined with other words (got '",
                    text, "')");
    AXONN_CHECK_ARG(flag != nullptr, kHelp, "; '", word, "' is none of them (got '", text, "')");
    AXONN_CHECK_ARG(!*flag, kHelp, "; '", word, "' is given twice (got '", text, "')");
    *flag = true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return o;
}

std::string overlap_name(const Overlap& o) {
  if (!o.any()) return "none";
  if (o == Overlap::all()) return "all";
  std::string s;
  for (auto [on, name] : {std::pair{o.oar, "oar"}, {o.ors, "ors"}, {o.oag, "oag"}, {o.dp, "dp"}})
    if (on) {
      if (!s.empty()) s += ',';
      s += name;
    }
  return s;
}

// --- ReduceScatterQueue -----------------------------------------------------------------------

ReduceScatterQueue::ReduceScatterQueue(Timeline& tl, int slots, bool overlap, const MemoryOps& memory,
                                       const kernels::Ops* device_ops)
    : tl_(tl), overlap_(overlap), mem_(memory), device_ops_(device_ops) {
  AXONN_CHECK_ARG(slots >= 1, "the reduce-scatter pool needs at least one slot, got ", slots);
  AXONN_CHECK(memory.device == Device::kCpu || device_ops != nullptr,
              "a ReduceScatterQueue in device memory needs the device's kernels");
  for (int i = 0; i < std::max(1, overlap ? slots : 1); i++) slots_.push_back(Slot{MemoryBuffer(memory), false});
}

ReduceScatterQueue::~ReduceScatterQueue() {
  // The buffers must outlive their collectives; the results are dropped (nobody will read them).
  for (InFlight& f : in_flight_) {
    try {
      f.work->wait();
    } catch (...) {
    }
  }
}

float* ReduceScatterQueue::block(int64_t n) {
  AXONN_CHECK(handed_out_ < 0, "ReduceScatterQueue::block() twice without issue()");
  for (;;) {
    for (size_t i = 0; i < slots_.size(); i++)
      if (!slots_[i].busy) {
        Slot& s = slots_[i];
        // the block, then room for this rank's piece (at most half a block: Gz >= 2 when reduce-scattering)
        const auto need = static_cast<size_t>(n + n / 2 + 1);
        s.buf.reserve(sizeof(float) * need);
        {
          auto zero = tl_.compute("zero_dweight_block");
          mem_.zero(s.buf.data(), sizeof(float) * static_cast<size_t>(n));
        }
        s.busy = true;
        handed_out_ = static_cast<int>(i);
        handed_n_ = n;
        return s.buf.f32();
      }
    retire_oldest();  // every slot in flight: wait for the oldest
  }
}

void ReduceScatterQueue::issue(comm::Communicator& z, float* block, float* dw_shard, int64_t shard_size, int tag) {
  AXONN_CHECK(handed_out_ >= 0 && slots_[static_cast<size_t>(handed_out_)].buf.f32() == block,
              "ReduceScatterQueue::issue() of a block that block() did not hand out");
  const int64_t n = shard_size * z.size();
  AXONN_CHECK(n == handed_n_, "reduce-scatter of ", n, " floats from a block of ", handed_n_);
  float* piece = block + n;
  InFlight f{handed_out_, tl_.reduce_scatter_async(z, block, piece, static_cast<size_t>(shard_size)), dw_shard,
             shard_size, n, tag};  // over Z
  handed_out_ = -1;
  in_flight_.push_back(std::move(f));
  if (!overlap_) drain();  // no ORS: complete inside the layer
}

void ReduceScatterQueue::retire_oldest() {
  AXONN_CHECK(!in_flight_.empty(), "no reduce-scatter in flight to retire");
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  f.work->wait_on(nullptr);  // GPU: the accumulation below is queued after the collective
  Slot& s = slots_[static_cast<size_t>(f.slot)];
  const float* piece = s.buf.f32() + f.block_size;
  {
    auto acc = tl_.compute("accumulate_dweight_shard");
    if (mem_.device == Device::kCpu) {
      for (int64_t i = 0; i < f.shard_size; i++) f.dw_shard[i] += piece[i];
    } else {
      device_ops_->residual_forward(f.dw_shard, f.dw_shard, piece, f.shard_size);  // dw += piece, in place
    }
  }
  s.busy = false;
  retired_.push_back(f.tag);
}

void ReduceScatterQueue::drain() {
  while (!in_flight_.empty()) retire_oldest();
}

std::vector<int> ReduceScatterQueue::take_retired() {
  std::vector<int> out;
  out.swap(retired_);
  return out;
}

size_t ReduceScatterQueue::bytes() const {
  size_t b = 0;
  for (const Slot& s : slots_) b += s.buf.bytes();
  return b;
}

// --- WeightGather -----------------------------------------------------------------------------

WeightGather::WeightGather(Timeline& tl, comm::Communicator& z2, std::vector<Kind> kinds, int layers, bool prefetch,
                           bool cache, const MemoryOps& memory, DType dtype)
    : tl_(tl), mem_(memory), z2_(z2), dtype_(dtype), kinds_(std::move(kinds)), layers_(layers), prefetch_(prefetch), cache_(cache) {
  if (z2_.size() > 1) {
    const size_t n = cache_ ? kinds_.size() * static_cast<size_t>(layers_) : 2;
    for (size_t i = 0; i < n; i++) buffers_.push_back(Buffer{MemoryBuffer(mem_), {-1, -1}, nullptr});
  }
}

WeightGather::~WeightGather() {
  for (Buffer& b : buffers_)
    if (b.pending) {
      try {
        b.pending->wait();
      } catch (...) {
      }
    }
}

WeightGather::Buffer* WeightGather::find(const Use& u) {
  if (cache_) {
    Buffer& b = buffers_[static_cast<size_t>(u.kind * layers_ + u.layer)];
    return b.holds == u ? &b : nullptr;
  }
  for (Buffer& b : buffers_)
    if (b.holds == u) return &b;
  return nullptr;
}

WeightGather::Buffer& WeightGather::victim(const Use& u) {
  if (cache_) return buffers_[static_cast<size_t>(u.kind * layers_ + u.layer)];
  // Keep the block taken last (the next use may be the same weight); the other one is free: its
  // use is over and nothing is in flight into it (the only prefetch in flight is the next use's).
  return &buffers_[0] == current_ ? buffers_[1] : buffers_[0];
}

void WeightGather::gather(Buffer& b, const Use& u, bool async) {
  const Kind& k = kinds_[static_cast<size_t>(u.kind)];
  b.data.reserve(dtype_size(dtype_) * static_cast<size_t>(k.block_size));
  b.holds = u;
  const void* shard = shard_of(k, u.layer);
  const auto n = static_cast<size_t>(k.shard_size);
  if (async)
    b.pending = tl_.all_gather_async(z2_, shard, b.data.data(), n, dtype_);  // over Z (second communicator)
  else
    tl_.all_gather(z2_, shard, b.data.data(), n, dtype_);  // over Z (second communicator)
}

void WeightGather::begin(std::vector<Use> uses) {
  for (Buffer& b : buffers_)
    if (b.pending) {
      b.pending->wait();
      b.pending.reset();
    }
  uses_ = std::move(uses);
  next_ = 0;
}

const void* WeightGather::shard_of(const Kind& k, int layer) const {
  return static_cast<const char*>(k.shards) +
         dtype_size(dtype_) * static_cast<size_t>(layer) * static_cast<size_t>(k.shard_size);
}

const void* WeightGather::take(int kind, int layer) {
  const Use u{kind, layer};
  AXONN_CHECK(next_ < uses_.size() && uses_[next_] == u, "weight (kind ", kind, ", layer ", layer,
              ") taken out of the order given to begin() (use ", next_, " of ", uses_.size(), ")");
  next_++;
  const Kind& k = kinds_[static_cast<size_t>(kind)];
  if (z2_.size() == 1) return shard_of(k, layer);  // the shard is the block
  Buffer* b = find(u);
  if (!b) {
    b = &victim(u);
    gather(*b, u, false);  // not prefetched (no OAG, or the pass's first use)
  }
  if (b->pending) {
    b->pending->wait_on(nullptr);  // the prefetch issued one use ago (GPU: the GEMMs wait, not the host)
    b->pending.reset();
  }
  current_ = b;
  if (prefetch_ && next_ < uses_.size()) {
    const Use& v = uses_[next_];
    if (!find(v)) gather(victim(v), v, true);  // OAG: runs while the caller computes with this block
  }
  return b->data.data();
}

void WeightGather::invalidate() {
  for (Buffer& b : buffers_) {
    if (b.pending) {
      b.pending->wait();
      b.pending.reset();
    }
    b.holds = {-1, -1};
  }
  current_ = nullptr;
}

size_t WeightGather::bytes() const {
  std::vector<int64_t> sizes;
  for (const Kind& k : kinds_) sizes.push_back(k.block_size);
  return bytes_for(sizes, layers_, z2_.size(), cache_, dtype_);
}

size_t WeightGather::bytes_for(const std::vector<int64_t>& block_sizes, int layers, int gz, bool cache, DType dtype) {
  if (gz == 1) return 0;  // the shard is the block: no buffer
  int64_t largest = 0, all = 0;
  for (int64_t b : block_sizes) {
    largest = std::max(largest, b);
    all += b * layers;
  }
  // one buffer per (kind, layer) when caching, else two of the largest block
  return dtype_size(dtype) * static_cast<size_t>(cache ? all : 2 * largest);
}

// --- GradAllReduce ----------------------------------------------------------------------------

void GradAllReduce::issue(comm::Communicator& group, const std::vector<Part>& parts) {
  if (group.size() == 1 || parts.empty()) return;  // nothing to sum
  Bucket b;
  b.parts = parts;
  if (parts.size() == 1) {
    b.work = tl_.all_reduce_async(group, parts[0].data, static_cast<size_t>(parts[0].n));  // in place
  } else {
    if (packed_used_ == packed_.size()) packed_.emplace_back(mem_);
    b.buffer = packed_used_++;
    b.packed = true;
    MemoryBuffer& buf = packed_[b.buffer];
    int64_t total = 0;
    for (const Part& p : parts) total += p.n;
    buf.reserve(sizeof(float) * static_cast<size_t>(total));
    {
      auto pack = tl_.compute("pack_gradient_bucket");
      float* at = buf.f32();
      for (const Part& p : parts) {
        mem_.copy(at, p.data, sizeof(float) * static_cast<size_t>(p.n));
        at += p.n;
      }
    }
    b.work = tl_.all_reduce_async(group, buf.f32(), static_cast<size_t>(total));
  }
  in_flight_.push_back(std::move(b));
}

void GradAllReduce::wait_all() {
  for (Bucket& b : in_flight_) {
    b.work->wait_on(nullptr);  // GPU: the unpacking and the optimizer wait, not the host
    if (!b.packed) continue;
    auto unpack = tl_.compute("unpack_gradient_bucket");
    const float* at = packed_[b.buffer].f32();
    for (const Part& p : b.parts) {
      mem_.copy(p.data, at, sizeof(float) * static_cast<size_t>(p.n));
      at += p.n;
    }
  }
  in_flight_.clear();
  packed_used_ = 0;
}

}  // namespace axonn::parallel
