// comm/nccl/nccl_communicator.hpp — the NCCL backend of Communicator (private).
//
// Ordering and lifetime:
//  * NcclState owns the ncclComm_t, the communicator's CUDA stream and the "ready" event. It is
//    shared by the communicator and by every Work it returned, so a Work may outlive the
//    communicator and still poll NCCL's asynchronous errors; the NCCL communicator is destroyed
//    with the last of them (aborted instead, if any collective failed or timed out).
//  * A collective: record `ready` on the compute stream, make the communicator's stream wait on it,
//    enqueue the NCCL call(s) there, record the Work's `done` event after them. Work::wait_on(s)
//    makes stream s wait on `done` (device side); wait() polls `done` from the host.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "axonn/comm/communicator.hpp"
#include "axonn/comm/nccl.hpp"
#include "core/cuda/device_buffer.hpp"

namespace axonn::comm::detail {

struct NcclState {
  NcclState() = default;
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState();

  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;   // owned: the collectives' stream
  cudaStream_t compute = nullptr;  // not owned: where the buffers are produced and consumed
  cudaEvent_t ready = nullptr;     // owned: recorded on `compute` before each collective
  double timeout_s = 0;
  std::string name;
  std::atomic<bool> failed{false};          // a collective failed or timed out: abort, do not destroy
  cuda_detail::DeviceBuffer barrier_word;   // one float, all-reduced by barrier()
};

// One enqueued collective: complete when its `done` event has fired.
class NcclWork final : public Work {
 public:
  // Takes ownership of `done` (already created; recorded by the caller after construction).
  NcclWork(std::shared_ptr<NcclState> state, cudaEvent_t done, std::string what);
  ~NcclWork() override;
  void wait() override;
  bool test() override;
  // cudaStreamWaitEvent(stream, done): the device waits, the host does not.
  void wait_on(void* stream) override;

 private:
  bool poll();  // true once complete (successfully or with error_ set)
  void fail(std::exception_ptr e);

  std::shared_ptr<NcclState> state_;
  cudaEvent_t done_event_ = nullptr;
  std::string what_;
  bool complete_ = false;
  bool waited_ = false;
  std::exception_ptr error_;
};

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `host`, which it keeps (for split/dup).
  NcclCommunicator(std::unique_ptr<Communicator> host, const NcclOptions& options);
  ~NcclCommunicator() override = default;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;
  std::unique_ptr<Communicator> dup(std::string name) override;

 protected:
  std::unique_ptr<Work> do_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op, bool async) override;
  std::unique_ptr<Work> do_all_gather(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override;
  std::unique_ptr<Work> do_all_gather_v(const void* send, void* recv, std::span<const size_t> recv_counts,
                                        DType dtype, bool async) override;
  std::unique_ptr<Work> do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                          ReduceOp op, bool async) override;
  std::unique_ptr<Work> do_broadcast(void* buf, size_t count, DType dtype, int root, bool async) override;
  std::unique_ptr<Work> do_all_to_all(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override;
  std::unique_ptr<Work> do_all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                                        std::span<const size_t> recv_counts, DType dtype, bool async) override;
  std::unique_ptr<Work> do_barrier(bool async) override;
  void copy_local(void* dst, const void* src, size_t bytes) override;

 private:
  // Orders after the compute stream, runs enqueue(comm, stream), records the completion event;
  // blocking (async = false) waits for it and returns nullptr.
  template <typename Enqueue>
  std::unique_ptr<Work> launch(std::string what, bool async, Enqueue&& enqueue);
  std::string describe(const char* collective, size_t count, DType dtype) const;

  std::unique_ptr<Communicator> host_;
  NcclOptions options_;
  std::shared_ptr<NcclState> state_;
};

}  // namespace axonn::comm::detail
