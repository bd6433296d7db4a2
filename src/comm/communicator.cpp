// Backend-independent half of Communicator: argument checks, and the short cuts for trivial
// collectives (a group of one rank, zero elements), which never reach the backend.
#include "axonn/comm/communicator.hpp"

#include <climits>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "axonn/core/error.hpp"

namespace axonn::comm {
namespace {

// A collective that had nothing to do.
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

std::unique_ptr<Work> done(bool async) {
  return async ? std::make_unique<CompletedWork>() : nullptr;
}

// Checks shared by every collective; `what` is "<collective> on communicator '<name>'".
class Checker {
 public:
  Checker(const char* collective, const Communicator& comm)
      : what_(::axonn::detail::concat(collective, " on communicator '", comm.name(), "'")) {}

  void dtype(DType t) const {
    const bool known = t == DType::kF32 || t == DType::kBF16 || t == DType::kI32 ||
                       t == DType::kI64 || t == DType::kU16;
    AXONN_CHECK_ARG(known, what_, ": unknown dtype ", static_cast<int>(t));
  }
  // MPI counts and displacements are C ints.
  void count(size_t n, const char* name) const {
    AXONN_CHECK_ARG(n <= static_cast<size_t>(INT_MAX), what_, ": ", name, " = ", n,
                    " elements is more than MPI's 2^31-1; split the buffer");
  }
  void buffer(const void* p, size_t n, const char* name) const {
    AXONN_CHECK_ARG(p != nullptr || n == 0, what_, ": ", name, " is null but holds ", n,
                    " elements");
  }
  void reduce(DType t, ReduceOp op) const {
    AXONN_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kMax || op == ReduceOp::kAvg, what_,
                    ": unknown reduce op ", static_cast<int>(op));
    AXONN_CHECK_ARG(op != ReduceOp::kAvg || t == DType::kF32 || t == DType::kBF16, what_,
                    ": ReduceOp::kAvg needs f32 or bf16 data, got ", dtype_name(t),
                    " (an integer average would truncate; use kSum and divide)");
  }
  void no_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) const {
    const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    const bool overlap = a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
    AXONN_CHECK_ARG(!overlap, what_, ": the send and receive buffers overlap");
  }
  // A list of per-rank counts: one entry per rank; returns the total, checked to fit in an int.
  size_t counts(std::span<const size_t> c, int size, const char* name) const {
    AXONN_CHECK_ARG(c.size() == static_cast<size_t>(size), what_, ": ", name, " has ", c.size(),
                    " entries for a group of ", size, " ranks");
    const size_t total = std::accumulate(c.begin(), c.end(), size_t{0});
    count(total, name);  // the displacements (prefix sums) are ints too
    return total;
  }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
};

}  // namespace

// --- all-reduce -------------------------------------------------------------------------------

void Communicator::all_reduce(void* buf, size_t count, DType dtype, ReduceOp op) {
  (void)checked_all_reduce(buf, count, dtype, op, false);
}
std::unique_ptr<Work> Communicator::all_reduce_async(void* buf, size_t count, DType dtype,
                                                     ReduceOp op) {
  return checked_all_reduce(buf, count, dtype, op, true);
}
std::unique_ptr<Work> Communicator::checked_all_reduce(void* buf, size_t count, DType dtype,
                                                     ReduceOp op, bool async) {
  Checker check("all_reduce", *this);
  check.dtype(dtype);
  check.reduce(dtype, op);
  check.count(count, "count");
  check.buffer(buf, count, "buf");
  // One rank: the sum, max and average of one value is that value.
  if (count == 0 || size() == 1) return done(async);
  return do_all_reduce(buf, count, dtype, op, async);
}

// --- all-gather -------------------------------------------------------------------------------

void Communicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  (void)checked_all_gather(send, recv, count, dtype, false);
}
std::unique_ptr<Work> Communicator::all_gather_async(const void* send, void* recv, size_t count,
                                                     DType dtype) {
  return checked_all_gather(send, recv, count, dtype, true);
}
std::unique_ptr<Work> Communicator::checked_all_gather(const void* send, void* recv, size_t count,
                                                     DType dtype, bool async) {
  Checker check("all_gather", *this);
  check.dtype(dtype);
  check.count(count, "count");
  check.buffer(send, count, "send");
  check.buffer(recv, count, "recv");
  const size_t block = count * dtype_size(dtype);
  const auto* mine = static_cast<const char*>(recv) + static_cast<size_t>(rank()) * block;
  const bool in_place = send == mine;
  if (!in_place) check.no_overlap(send, block, recv, block * static_cast<size_t>(size()));
  if (count == 0) return done(async);
  if (size() == 1) {
    if (!in_place) copy_local(recv, send, block);
    return done(async);
  }
  return do_all_gather(send, recv, count, dtype, async);
}

void Communicator::all_gather_v(const void* send, size_t send_count, void* recv,
                                std::span<const size_t> recv_counts, DType dtype) {
  (void)checked_all_gather_v(send, send_count, recv, recv_counts, dtype, false);
}
std::unique_ptr<Work> Communicator::all_gather_v_async(const void* send, size_t send_count,
                                                       void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype) {
  return checked_all_gather_v(send, send_count, recv, recv_counts, dtype, true);
}
std::unique_ptr<Work> Communicator::checked_all_gather_v(const void* send, size_t send_count,
                                                       void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype, bool async) {
  Checker check("all_gather_v", *this);
  check.dtype(dtype);
  const size_t total = check.counts(recv_counts, size(), "recv_counts");
  AXONN_CHECK_ARG(send_count == recv_counts[static_cast<size_t>(rank())], check.what(),
                  ": rank ", rank(), " sends ", send_count, " elements but recv_counts[", rank(),
                  "] = ", recv_counts[static_cast<size_t>(rank())]);
  check.buffer(send, send_count, "send");
  check.buffer(recv, total, "recv");
  const size_t es = dtype_size(dtype);
  check.no_overlap(send, send_count * es, recv, total * es);
  if (size() == 1) {
    if (send_count > 0) copy_local(recv, send, send_count * es);
    return done(async);
  }
  return do_all_gather_v(send, recv, recv_counts, dtype, async);
}

// --- reduce-scatter ---------------------------------------------------------------------------

void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                  ReduceOp op) {
  (void)checked_reduce_scatter(send, recv, recv_count, dtype, op, false);
}
std::unique_ptr<Work> Communicator::reduce_scatter_async(const void* send, void* recv,
                                                         size_t recv_count, DType dtype,
                                                         ReduceOp op) {
  return checked_reduce_scatter(send, recv, recv_count, dtype, op, true);
}
std::unique_ptr<Work> Communicator::checked_reduce_scatter(const void* send, void* recv,
                                                         size_t recv_count, DType dtype,
                                                         ReduceOp op, bool async) {
  Checker check("reduce_scatter", *this);
  check.dtype(dtype);
  check.reduce(dtype, op);
  check.count(recv_count, "recv_count");
  check.buffer(send, recv_count, "send");
  check.buffer(recv, recv_count, "recv");
  const size_t block = recv_count * dtype_size(dtype);
  check.no_overlap(send, block * static_cast<size_t>(size()), recv, block);
  if (recv_count == 0) return done(async);
  if (size() == 1) {
    copy_local(recv, send, block);
    return done(async);
  }
  return do_reduce_scatter(send, recv, recv_count, dtype, op, async);
}

// --- broadcast --------------------------------------------------------------------------------

void Communicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  (void)checked_broadcast(buf, count, dtype, root, false);
}
std::unique_ptr<Work> Communicator::broadcast_async(void* buf, size_t count, DType dtype,
                                                    int root) {
  return checked_broadcast(buf, count, dtype, root, true);
}
std::unique_ptr<Work> Communicator::checked_broadcast(void* buf, size_t count, DType dtype,
                                                    int root, bool async) {
  Checker check("broadcast", *this);
  check.dtype(dtype);
  check.count(count, "count");
  check.buffer(buf, count, "buf");
  AXONN_CHECK_ARG(root >= 0 && root < size(), check.what(), ": root ", root,
                  " is not a rank of this group of ", size());
  if (count == 0 || size() == 1) return done(async);
  return do_broadcast(buf, count, dtype, root, async);
}

// --- all-to-all -------------------------------------------------------------------------------

void Communicator::all_to_all(const void* send, void* recv, size_t count, DType dtype) {
  (void)checked_all_to_all(send, recv, count, dtype, false);
}
std::unique_ptr<Work> Communicator::all_to_all_async(const void* send, void* recv, size_t count,
                                                     DType dtype) {
  return checked_all_to_all(send, recv, count, dtype, true);
}
std::unique_ptr<Work> Communicator::checked_all_to_all(const void* send, void* recv, size_t count,
                                                     DType dtype, bool async) {
  Checker check("all_to_all", *this);
  check.dtype(dtype);
  check.count(count, "count");
  check.buffer(send, count, "send");
  check.buffer(recv, count, "recv");
  const size_t bytes = count * dtype_size(dtype) * static_cast<size_t>(size());
  check.no_overlap(send, bytes, recv, bytes);
  if (count == 0) return done(async);
  if (size() == 1) {
    copy_local(recv, send, bytes);
    return done(async);
  }
  return do_all_to_all(send, recv, count, dtype, async);
}

void Communicator::all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                                std::span<const size_t> recv_counts, DType dtype) {
  (void)checked_all_to_all_v(send, send_counts, recv, recv_counts, dtype, false);
}
std::unique_ptr<Work> Communicator::all_to_all_v_async(const void* send,
                                                       std::span<const size_t> send_counts,
                                                       void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype) {
  return checked_all_to_all_v(send, send_counts, recv, recv_counts, dtype, true);
}
std::unique_ptr<Work> Communicator::checked_all_to_all_v(const void* send,
                                                       std::span<const size_t> send_counts,
                                                       void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype, bool async) {
  Checker check("all_to_all_v", *this);
  check.dtype(dtype);
  const size_t send_total = check.counts(send_counts, size(), "send_counts");
  const size_t recv_total = check.counts(recv_counts, size(), "recv_counts");
  check.buffer(send, send_total, "send");
  check.buffer(recv, recv_total, "recv");
  const size_t es = dtype_size(dtype);
  check.no_overlap(send, send_total * es, recv, recv_total * es);
  if (size() == 1) {
    AXONN_CHECK_ARG(send_total == recv_total, check.what(), ": a group of one rank sends ",
                    send_total, " elements to itself but expects ", recv_total);
    if (send_total > 0) copy_local(recv, send, send_total * es);
    return done(async);
  }
  return do_all_to_all_v(send, send_counts, recv, recv_counts, dtype, async);
}

void Communicator::copy_local(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

// --- barrier ----------------------------------------------------------------------------------

void Communicator::barrier() {
  if (size() > 1) (void)do_barrier(false);
}
std::unique_ptr<Work> Communicator::barrier_async() {
  return size() > 1 ? do_barrier(true) : done(true);
}

}  // namespace axonn::comm
