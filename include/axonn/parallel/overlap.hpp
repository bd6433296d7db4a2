// parallel/overlap.hpp — the machinery that lets collectives run under computation (spec/axonn.md
// §4, docs/overlap.md):
//   Overlap              which overlaps are on (--overlap none|all|oar,ors,oag,dp)
//   ReduceScatterQueue   ORS: the weight-gradient reduce-scatters over Z, issued and not waited in the
//                        layer; a bounded pool of dW blocks; results accumulated into the shard gradient
//                        when retired (oldest first), all retired before the gradient sync
//   WeightGather         OAG: the all-gathers over Z (second communicator) of the weight blocks, one use
//                        ahead in the order the pass takes them; double-buffered, or one buffer per
//                        weight when gathered weights are cached across micro-batches
//   GradAllReduce        the gradient sums over data (and Z·data for replicated tensors), bucketed,
//                        issued as gradients become final and completed at the sync (DP overlap)
// Where a result is consumed, the Work is completed with wait_on(nullptr): on the GPU (NCCL) the compute
// stream waits for the collective and the host keeps queueing kernels, so the overlap happens on the
// device; on the host backends (MPI, MPI-staged) wait_on is wait().
// Every class issues its collectives from the calling thread in program order, so all ranks of a
// group issue the same collectives in the same order whatever the timing: the overlap changes when
// a collective completes, never which collectives run or what they sum. The results are therefore
// bit-identical with and without overlap.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/core/memory.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/parallel/timeline.hpp"

namespace axonn::parallel {

// Which collectives overlap with computation.
struct Overlap {
  bool oar = false;  // backward all-reduce of the input gradient runs during the weight-gradient GEMM
  bool ors = false;  // weight-gradient reduce-scatters over Z complete in the background (ReduceScatterQueue)
  bool oag = false;  // the next weight's all-gather over Z is issued one linear ahead (WeightGather)
  bool dp = false;   // gradient all-reduces over data (and Z·data) are issued during the backward
  bool operator==(const Overlap&) const = default;
  bool any() const { return oar || ors || oag || dp; }
  static Overlap all() { return {true, true, true, true}; }
};
// "none", "all", or a comma-separated list of oar, ors, oag, dp (e.g. "oar,ors"). Throws
// InvalidArgument naming the accepted words.
Overlap parse_overlap(std::string_view text);
// The canonical text: "none", "all" or the list in the order oar,ors,oag,dp.
std::string overlap_name(const Overlap& o);

// ---------------------------------------------------------------------------------------------
// ORS. A layer's backward asks for a block, computes its weight gradient into it, and issues the
// reduce-scatter over Z; the queue adds this rank's piece to the shard gradient when the collective
// is retired. Retirement happens oldest first, at fixed points: when a block is asked for and every
// slot is in flight, and in drain(). Without overlap, issue() retires at once (same collective,
// same sums: identical results).
class ReduceScatterQueue {
 public:
  // memory: where the blocks live (the model's memory); for device memory, `device_ops` (the
  // kernels of that memory) adds the reduced piece to the shard.
  ReduceScatterQueue(Timeline& tl, int slots, bool overlap, const MemoryOps& memory = host_memory(),
                     const kernels::Ops* device_ops = nullptr);
  ReduceScatterQueue(const ReduceScatterQueue&) = delete;
  ReduceScatterQueue& operator=(const ReduceScatterQueue&) = delete;
  ~ReduceScatterQueue();

  // A zeroed block of n floats to compute a weight gradient into (retires the oldest reduce-scatter
  // first when every slot is in flight). Valid until the matching issue().
  float* block(int64_t n);
  // Sums the block from block() over z and adds this rank's piece [shard_size] to dw_shard, now
  // (no overlap) or when retired. tag: the caller's name for the shard (see take_retired()).
  void issue(comm::Communicator& z, float* block, float* dw_shard, int64_t shard_size, int tag);
  // The same bookkeeping for a shard whose gradient is already complete here (Gz = 1: the layer
  // accumulated straight into it), so that take_retired() lists every shard in backward order.
  void complete_now(int tag) { retired_.push_back(tag); }
  // Retires every reduce-scatter in flight, oldest first.
  void drain();
  bool empty() const { return in_flight_.empty(); }
  // Tags of the shards whose gradient became complete since the last call, in retirement order
  // (= issue order).
  std::vector<int> take_retired();
  // Bytes of the block pool.
  size_t bytes() const;

 private:
  struct Slot {
    MemoryBuffer buf;  // the dW block, then this rank's reduced piece
    bool busy = false;
  };
  struct InFlight {
    int slot;
    std::unique_ptr<comm::Work> work;
    float* dw_shard;
    int64_t shard_size, block_size;
    int tag;
  };
  void retire_oldest();

  Timeline& tl_;
  bool overlap_;
  const MemoryOps& mem_;
  const kernels::Ops* device_ops_;
  std::vector<Slot> slots_;
  std::deque<InFlight> in_flight_;
  int handed_out_ = -1;  // the slot between block() and issue()
  int64_t handed_n_ = 0;  // and its block size
  std::vector<int> retired_;
};

// ---------------------------------------------------------------------------------------------
// OAG. The weight blocks a pass uses, in order (begin()); take() returns the gathered block of the
// next use, waiting for its all-gather (issued one use ahead when prefetching) or gathering it now,
// and then issues the all-gather of the use after it. A block still held from an earlier use (the
// backward starts with the forward's last two weights; recompute uses each weight twice in a row)
// is not gathered again. Gz = 1: the shard is the block, nothing is gathered.
class WeightGather {
 public:
  struct Kind {
    const void* shards;  // layer l's shard at shards + l * shard_size elements
    int64_t shard_size, block_size;
  };
  struct Use {
    int kind, layer;
    bool operator==(const Use&) const = default;
  };
  // z2: the second Z communicator (weight all-gathers never queue behind the reduce-scatters on Z).
  // cache: one buffer per (kind, layer), kept until invalidate(); else two buffers of the largest block.
  // memory: where the shards and the gathered blocks live; dtype: their elements' type (fp32, or the
  // bf16 weight copies of mixed precision, which halve the all-gathers' bytes).
  WeightGather(Timeline& tl, comm::Communicator& z2, std::vector<Kind> kinds, int layers, bool prefetch, bool cache,
               const MemoryOps& memory = host_memory(), DType dtype = DType::kF32);
  WeightGather(const WeightGather&) = delete;
  WeightGather& operator=(const WeightGather&) = delete;
  ~WeightGather();

  // The uses of the coming pass, in order. Waits for a prefetch still in flight.
  void begin(std::vector<Use> uses);
  // The gathered block [block_size elements of dtype] of weight (kind, layer), which must be the pass's
  // next use. Valid until the next take() (or, when caching, until invalidate()).
  const void* take(int kind, int layer);
  // The shards changed (optimizer step, loading): forget every gathered block.
  void invalidate();
  size_t bytes() const;
  // What the buffers of a WeightGather over `gz` ranks hold once every weight has been gathered: kinds of
  // these block sizes (elements of dtype), `layers` of each (bytes() of the one built so; here before it is).
  static size_t bytes_for(const std::vector<int64_t>& block_sizes, int layers, int gz, bool cache, DType dtype);

 private:
  struct Buffer {
    MemoryBuffer data;
    Use holds{-1, -1};                    // what data holds (or is being gathered into it)
    std::unique_ptr<comm::Work> pending;  // its all-gather, while in flight
  };
  const void* shard_of(const Kind& k, int layer) const;  // layer's shard of kind k
  Buffer* find(const Use& u);
  Buffer& victim(const Use& u);  // where u goes: its own buffer (cache) or the one not in use
  void gather(Buffer& b, const Use& u, bool async);

  Timeline& tl_;
  const MemoryOps& mem_;
  comm::Communicator& z2_;
  DType dtype_;
  std::vector<Kind> kinds_;
  int layers_;
  bool prefetch_, cache_;
  std::vector<Buffer> buffers_;
  Buffer* current_ = nullptr;  // holds the block the last take() returned
  std::vector<Use> uses_;
  size_t next_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Gradient all-reduces. issue() sums a bucket of gradient pieces over a group: one piece in place,
// several packed into one message (and copied back when completed). wait_all() completes every
// issued bucket in issue order. Issued during the backward, they overlap with it (DP overlap);
// issued at the sync and waited at once, they do not; the sums are the same.
class GradAllReduce {
 public:
  struct Part {
    float* data;
    int64_t n;
  };
  // memory: where the gradients (and so the packed buckets) live.
  explicit GradAllReduce(Timeline& tl, const MemoryOps& memory = host_memory()) : tl_(tl), mem_(memory) {}
  void issue(comm::Communicator& group, const std::vector<Part>& parts);
  void wait_all();
  bool pending() const { return !in_flight_.empty(); }

 private:
  struct Bucket {
    std::vector<Part> parts;
    std::unique_ptr<comm::Work> work;
    size_t buffer = 0;  // index in packed_, when packed
    bool packed = false;
  };
  Timeline& tl_;
  const MemoryOps& mem_;
  std::vector<Bucket> in_flight_;
  std::vector<MemoryBuffer> packed_;  // reused across steps
  size_t packed_used_ = 0;
};

}  // namespace axonn::parallel
