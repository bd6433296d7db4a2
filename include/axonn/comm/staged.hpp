// comm/staged.hpp — a Communicator for DEVICE buffers that stages every collective through host
// memory and a host (MPI) communicator: device -> host staging buffer -> MPI -> host -> device.
//
// What it is for: machines without NCCL, and several ranks sharing one GPU in tests (NCCL refuses
// two ranks of a group on one device; MPI does not care where its host buffers came from). It is
// slower than NCCL (two copies over PCIe and a host collective) and never overlaps on the device;
// use NCCL where it can run.
//
// The copies go through a StagingCopier, so the staging logic itself is independent of CUDA: the
// CUDA copier (comm/cuda.hpp: staged_cuda_from) queues cudaMemcpyAsync on the kernels' compute
// stream and stages in pinned memory; host_copier() copies with memcpy, which makes the staged
// communicator testable on any machine against the plain MPI communicator.
//
//   auto world = axonn::comm::world();                        // MPI
//   auto gpu = axonn::comm::staged_cuda_from(world);          // device buffers, via the host
//   gpu->all_reduce(d_grad, n, DType::kF32);                  // blocks until d_grad holds the sum
//   auto w = gpu->all_gather_async(d_shard, d_full, n, DType::kBF16);
//   w->wait();                                                // copied back to d_full
//
// Semantics (in addition to Communicator's rules):
//  * A collective first queues the device -> host copy of what it sends and waits for it
//    (StagingCopier::synchronize), so it sends what the work queued before it wrote; then it starts
//    the host collective. The blocking form then copies the result back and waits for that copy; the
//    asynchronous form returns a Work whose wait() does it, after the host collective completes.
//    test() returns true only once the copy back is done (it makes the copy when the host collective
//    has completed). wait_on(stream) is wait(): MPI completes on the host.
//  * Staging buffers belong to the communicator and are reused: one per collective in flight, grown
//    to the largest size seen, never shared by two collectives in flight.
//  * barrier() is the host barrier (it orders the ranks, not device work).
//  * split() and dup() return staged communicators over the host communicator's split/dup, with the
//    same copier and their own staging buffers.
#pragma once

#include <cstddef>
#include <memory>

#include "axonn/comm/communicator.hpp"

namespace axonn::comm {

// How the staged communicator moves bytes between "device" memory and host staging memory.
// One copier may serve several communicators (split/dup share it) on the thread that issues their
// collectives.
class StagingCopier {
 public:
  StagingCopier() = default;
  StagingCopier(const StagingCopier&) = delete;
  StagingCopier& operator=(const StagingCopier&) = delete;
  virtual ~StagingCopier() = default;

  // Host staging memory of `bytes` (> 0), aligned to at least 64 bytes (pinned for a GPU, so the
  // copies are true DMA and can be asynchronous). Throws when it cannot allocate.
  virtual void* allocate_host(size_t bytes) = 0;
  virtual void free_host(void* p) noexcept = 0;
  // Queue a copy; it may complete later (until synchronize()). The source must stay unchanged and
  // the destination unread until then.
  virtual void to_host(void* host, const void* device, size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, size_t bytes) = 0;
  // Queue a device -> device copy, ordered with the device work (a group of one rank).
  virtual void device_copy(void* dst, const void* src, size_t bytes) = 0;
  // Returns once every copy queued so far is complete (and, for a GPU, the device work queued
  // before them on the same stream).
  virtual void synchronize() = 0;
};

// Copies with memcpy, allocates with aligned operator new: "device" memory is host memory. For
// testing the staging logic against the plain host communicator, and for host buffers.
std::shared_ptr<StagingCopier> host_copier();

// A staged communicator over the ranks of `host` (not collective: it makes no new MPI group and
// uses `host` itself, which it keeps alive). Every rank must use the same kind of communicator.
std::shared_ptr<Communicator> staged_from(std::shared_ptr<Communicator> host,
                                          std::shared_ptr<StagingCopier> copier);

}  // namespace axonn::comm
