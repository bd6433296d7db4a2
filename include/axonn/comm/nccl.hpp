// comm/nccl.hpp — a Communicator over NCCL, for DEVICE buffers (built only with -DAXONN_CUDA=ON and
// NCCL; link axonn_comm_nccl). No CUDA or NCCL header is included here.
//
// An NCCL communicator is made from a host (MPI) communicator over the same ranks: rank 0 of the
// group creates NCCL's unique id, the host communicator broadcasts it, and every rank joins with
// ncclCommInitRank on its *current* CUDA device (select the device before: one device per rank;
// NCCL refuses two ranks of one group on one device). The NCCL communicator keeps a duplicate of
// the host communicator, so that split() and dup() can make the matching MPI groups and bootstrap
// new NCCL communicators over them.
//
//   auto world = axonn::comm::world();             // MPI
//   axonn::comm::select_device_by_local_rank();    // comm/cuda.hpp
//   auto gpu = axonn::comm::nccl_from(*world);     // collective over world
//   gpu->all_reduce(d_grad, n, DType::kF32);       // device pointer; blocks until done
//   auto w = gpu->all_gather_async(d_shard, d_full, n, DType::kBF16);
//   ...                                            // kernels on the compute stream
//   w->wait_on(nullptr);                           // later kernels wait for it; the host does not
//
// Semantics (in addition to Communicator's rules):
//  * Buffers are device pointers on the communicator's device. Each collective runs on the
//    communicator's own (non-blocking, high-priority) CUDA stream, after the work queued so far on
//    the compute stream (an event recorded there, waited on the communicator's stream): data written
//    by earlier kernels is what gets sent, and the kernels queued after the call overlap with it.
//  * Blocking collectives return when the result is in place (host-side wait). An asynchronous one
//    returns a Work whose wait() blocks the host until the collective is complete, polling for NCCL's
//    asynchronous errors (rethrown as CommError) and giving up after `timeout_s`; until then the
//    buffers belong to the collective. Its wait_on(stream) is the device-side wait instead
//    (cudaStreamWaitEvent on the collective's end event; nullptr = the compute stream): kernels
//    queued on that stream afterwards see the result, and the host never blocks (spec §4.5).
//  * dtypes: f32, bf16, i32 and i64 for everything; u16 only for collectives that move data without
//    reducing it (NCCL has no 16-bit unsigned type).
//  * Every rank must create (nccl_from, split, dup) and destroy its NCCL communicators in the same
//    order; creation blocks until every rank of the group has joined.
#pragma once

#include <memory>

#include "axonn/comm/communicator.hpp"

namespace axonn::comm {

struct NcclOptions {
  // The cudaStream_t on which the buffers are produced and consumed; nullptr = the kernels' compute
  // stream of the communicator's device (kernels::cuda_compute_stream()), the right one unless the
  // caller runs its own kernels on a stream of its own.
  void* compute_stream = nullptr;
  // Work::wait() throws CommError after this many seconds without completion (a peer that died or
  // diverged), and the communicator is aborted when destroyed. 0 waits forever.
  double timeout_s = 600.0;
};

// An NCCL communicator over the ranks of `host` (collective over host). The result is named like
// host and owns its own duplicate of it.
std::shared_ptr<Communicator> nccl_from(Communicator& host, const NcclOptions& options = {});

}  // namespace axonn::comm
