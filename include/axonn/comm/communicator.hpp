// comm/communicator.hpp — collectives over a group of ranks.
//
// A Communicator is a group of ranks (the world, or one group of the 4D grid: X, Y, Z, data, ...)
// and the collectives over it. Buffers are raw host pointers with an element count and a DType
// (fp32, bf16, int32, int64, uint16); counts are in elements, not bytes. Every collective exists
// blocking (returns when this rank's part is done and the output is valid) and non-blocking
// (`*_async`: returns a Work at once; the output is valid after Work::wait()).
//
//   auto world = axonn::comm::world();
//   world->all_reduce(grad, n, DType::kF32, ReduceOp::kAvg);              // blocks
//   auto w = world->all_gather_async(shard, full, n_local, DType::kBF16);  // returns at once
//   ...                                                                    // compute
//   w->wait();
//
// RULES (as for MPI and NCCL):
//  * Every rank of the group must issue the same collectives, with matching counts, in the same
//    order. A rank that skips one (e.g. because it threw) leaves the others blocked.
//  * One thread issues the collectives of a communicator (the library's own progress thread only
//    completes them). Collectives of different communicators may be in flight at the same time, and
//    several on one communicator too; their Works may be waited in any order.
//  * Arguments are checked on the calling rank before anything is sent: a bad argument (null buffer,
//    count list of the wrong length, root out of range, kAvg on integers, more than 2^31-1 elements)
//    throws axonn::InvalidArgument. Since every rank checks the same values, a mistake made alike on
//    every rank throws on every rank and nobody hangs.
//  * Failures reported by MPI throw axonn::CommError (blocking) or are rethrown by Work::wait().
//  * Destroy every Communicator (and Grid) before the comm::Runtime that initialised MPI.
//
// bf16 reductions are done by a user-defined operation that widens both operands to fp32, adds (or
// compares) and rounds the result to nearest even: every combining step rounds once, as NCCL does.
// kAvg divides the reduced value by size() afterwards (for bf16, in fp32, rounded once more).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "axonn/comm/reduce_op.hpp"
#include "axonn/comm/work.hpp"
#include "axonn/core/dtype.hpp"

namespace axonn::comm {

class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  // This rank's index in the group, 0 <= rank() < size().
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A short name for messages ("world", "x", "z2", ...).
  virtual const std::string& name() const = 0;

  // --- all-reduce: in place. buf[count] on every rank becomes the reduction over the group.
  void all_reduce(void* buf, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum);
  [[nodiscard]] std::unique_ptr<Work> all_reduce_async(void* buf, size_t count, DType dtype,
                                                       ReduceOp op = ReduceOp::kSum);

  // --- all-gather, equal blocks: send[count] from rank r lands at recv[r*count, (r+1)*count).
  // recv holds size()*count elements. send may be recv + rank()*count (in place); otherwise the
  // buffers must not overlap.
  void all_gather(const void* send, void* recv, size_t count, DType dtype);
  [[nodiscard]] std::unique_ptr<Work> all_gather_async(const void* send, void* recv, size_t count,
                                                       DType dtype);

  // --- all-gather, variable blocks: rank r sends recv_counts[r] elements (send_count must equal
  // recv_counts[rank()]); they land packed in rank order, at offset sum(recv_counts[0..r)).
  // recv_counts has size() entries, identical on every rank.
  void all_gather_v(const void* send, size_t send_count, void* recv,
                    std::span<const size_t> recv_counts, DType dtype);
  [[nodiscard]] std::unique_ptr<Work> all_gather_v_async(const void* send, size_t send_count,
                                                         void* recv,
                                                         std::span<const size_t> recv_counts,
                                                         DType dtype);

  // --- reduce-scatter, equal blocks: send[size()*recv_count] on every rank; block r of the
  // reduction (elements [r*recv_count, (r+1)*recv_count)) lands in recv[recv_count] on rank r.
  // Conjugate of all_gather. The buffers must not overlap.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op = ReduceOp::kSum);
  [[nodiscard]] std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv,
                                                           size_t recv_count, DType dtype,
                                                           ReduceOp op = ReduceOp::kSum);

  // --- broadcast: buf[count] of rank `root` is copied to buf on every rank.
  void broadcast(void* buf, size_t count, DType dtype, int root);
  [[nodiscard]] std::unique_ptr<Work> broadcast_async(void* buf, size_t count, DType dtype, int root);

  // --- all-to-all, equal blocks: block j of send (send[j*count, (j+1)*count)) goes to rank j and
  // lands there as block r = rank() of recv. Both hold size()*count elements; no overlap.
  void all_to_all(const void* send, void* recv, size_t count, DType dtype);
  [[nodiscard]] std::unique_ptr<Work> all_to_all_async(const void* send, void* recv, size_t count,
                                                       DType dtype);

  // --- all-to-all, variable blocks: send_counts[j] elements go to rank j, taken packed in rank
  // order from send; recv_counts[j] elements arrive from rank j, packed in rank order into recv.
  // send_counts[j] on rank i must equal recv_counts[i] on rank j. Both lists have size() entries.
  void all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                    std::span<const size_t> recv_counts, DType dtype);
  [[nodiscard]] std::unique_ptr<Work> all_to_all_v_async(const void* send,
                                                         std::span<const size_t> send_counts,
                                                         void* recv,
                                                         std::span<const size_t> recv_counts,
                                                         DType dtype);

  // --- barrier: returns (or completes) once every rank of the group has entered it.
  void barrier();
  [[nodiscard]] std::unique_ptr<Work> barrier_async();

  // --- new communicators. Both are collective over this group (every rank must call them).
  // split: ranks passing the same color >= 0 form one new group, ordered by (key, rank()); a rank
  // passing a negative color joins no group and gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name) = 0;
  // dup: the same group on an independent communicator, so its collectives never queue behind this
  // one's (the grid's second Z communicator for weight all-gathers).
  virtual std::unique_ptr<Communicator> dup(std::string name) = 0;

 protected:
  Communicator() = default;

  // Backend entry points, called after the public functions above have checked the arguments.
  // With async=false they block and return nullptr; with async=true they return the Work.
  // The count spans are valid only during the call: a non-blocking backend copies what it needs and
  // keeps the copies alive until the collective completes (MPI requires it).
  virtual std::unique_ptr<Work> do_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                              bool async) = 0;
  virtual std::unique_ptr<Work> do_all_gather(const void* send, void* recv, size_t count,
                                              DType dtype, bool async) = 0;
  virtual std::unique_ptr<Work> do_all_gather_v(const void* send, void* recv,
                                                std::span<const size_t> recv_counts, DType dtype,
                                                bool async) = 0;
  virtual std::unique_ptr<Work> do_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                                  DType dtype, ReduceOp op, bool async) = 0;
  virtual std::unique_ptr<Work> do_broadcast(void* buf, size_t count, DType dtype, int root,
                                             bool async) = 0;
  virtual std::unique_ptr<Work> do_all_to_all(const void* send, void* recv, size_t count,
                                              DType dtype, bool async) = 0;
  virtual std::unique_ptr<Work> do_all_to_all_v(const void* send,
                                                std::span<const size_t> send_counts, void* recv,
                                                std::span<const size_t> recv_counts, DType dtype,
                                                bool async) = 0;
  virtual std::unique_ptr<Work> do_barrier(bool async) = 0;
  // The copy a group of one rank makes instead of a collective (all-gather, reduce-scatter,
  // all-to-all): memcpy for host buffers; a device backend copies on its device.
  virtual void copy_local(void* dst, const void* src, size_t bytes);

 private:
  // Check the arguments, take the short cuts (one rank, zero elements), else call do_*.
  std::unique_ptr<Work> checked_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                           bool async);
  std::unique_ptr<Work> checked_all_gather(const void* send, void* recv, size_t count, DType dtype,
                                           bool async);
  std::unique_ptr<Work> checked_all_gather_v(const void* send, size_t send_count, void* recv,
                                             std::span<const size_t> recv_counts, DType dtype,
                                             bool async);
  std::unique_ptr<Work> checked_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                               DType dtype, ReduceOp op, bool async);
  std::unique_ptr<Work> checked_broadcast(void* buf, size_t count, DType dtype, int root,
                                          bool async);
  std::unique_ptr<Work> checked_all_to_all(const void* send, void* recv, size_t count, DType dtype,
                                           bool async);
  std::unique_ptr<Work> checked_all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                             void* recv, std::span<const size_t> recv_counts,
                                             DType dtype, bool async);
};

}  // namespace axonn::comm
