// comm/nccl/nccl_communicator.cpp — Communicator over NCCL for device buffers.
#include "nccl_communicator.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <string_view>
#include <thread>
#include <utility>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/stream.hpp"

namespace axonn::comm {

std::shared_ptr<Communicator> nccl_from(Communicator& host, const NcclOptions& options) {
  AXONN_CHECK_ARG(dynamic_cast<detail::NcclCommunicator*>(&host) == nullptr, "nccl_from: communicator '",
                  host.name(), "' is already an NCCL communicator; pass the MPI communicator of the same group");
  return std::make_shared<detail::NcclCommunicator>(host.dup(host.name()), options);
}

}  // namespace axonn::comm

namespace axonn::comm::detail {
namespace {

using cuda_detail::DeviceGuard;

// NCCL's argument and usage errors are ours (InvalidArgument); the rest are communication
// failures (CommError). The message names what we were doing, NCCL's error string and its last
// error text, and where in our code the call was made.
[[noreturn]] void throw_nccl(ncclResult_t rc, std::string_view call, std::string_view context, ncclComm_t comm,
                             const std::source_location& loc) {
  const char* last = ncclGetLastError(comm);
  const std::string name(call.substr(0, call.find('(')));
  const std::string msg = ::axonn::detail::concat(context, ": ", name, " failed: ", ncclGetErrorString(rc),
                                                  (last != nullptr && *last != '\0') ? " (" : "",
                                                  last != nullptr ? last : "",
                                                  (last != nullptr && *last != '\0') ? ")" : "", " at ",
                                                  loc.file_name(), ":", loc.line());
  if (rc == ncclInvalidArgument || rc == ncclInvalidUsage) throw InvalidArgument(msg);
  throw CommError(msg);
}

#define AXONN_NCCL_CHECK(call, context, comm)                                                         \
  do {                                                                                                \
    const ncclResult_t axonn_nccl_rc_ = (call);                                                       \
    if (axonn_nccl_rc_ != ncclSuccess) [[unlikely]]                                                   \
      throw_nccl(axonn_nccl_rc_, #call, (context), (comm), std::source_location::current());          \
  } while (0)

// An NCCL type and how many of its elements make one element of ours.
struct NcclType {
  ncclDataType_t type;
  size_t scale;
};

NcclType nccl_type(DType t, bool reduces, const std::string& what) {
  switch (t) {
    case DType::kF32: return {ncclFloat32, 1};
    case DType::kBF16: return {ncclBfloat16, 1};
    case DType::kI32: return {ncclInt32, 1};
    case DType::kI64: return {ncclInt64, 1};
    case DType::kU16:
      AXONN_CHECK_ARG(!reduces, what, ": NCCL has no 16-bit unsigned type to reduce; use i32");
      return {ncclUint8, 2};  // moved as bytes
  }
  throw InvalidArgument(what + ": unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;  // NCCL >= 2.10: the sum divided by the group size
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

constexpr size_t kIdWords = sizeof(ncclUniqueId) / sizeof(int32_t);
static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0, "ncclUniqueId is sent as int32 words");

}  // namespace

// --- NcclState --------------------------------------------------------------------------------

NcclState::~NcclState() {
  int previous = -1;
  const bool switched =
      cudaGetDevice(&previous) == cudaSuccess && previous != device && cudaSetDevice(device) == cudaSuccess;
  // Every Work holds this state, so no collective of ours is still waited for here. After a failure
  // or a timeout the peers may never finish theirs: abort rather than destroy (which could block).
  if (comm != nullptr) (void)(failed.load() ? ncclCommAbort(comm) : ncclCommDestroy(comm));
  if (ready != nullptr) (void)cudaEventDestroy(ready);
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
  if (switched) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

// --- NcclWork ---------------------------------------------------------------------------------

NcclWork::NcclWork(std::shared_ptr<NcclState> state, cudaEvent_t done, std::string what)
    : state_(std::move(state)), done_event_(done), what_(std::move(what)) {}

NcclWork::~NcclWork() {
  // The buffers must not be freed under a running collective: wait; an error nobody asked for is
  // only logged (a destructor cannot throw).
  if (!waited_) {
    try {
      wait();
    } catch (const std::exception& e) {
      log_warn("%s: a Work destroyed without wait() failed: %s", what_.c_str(), e.what());
    }
  }
  if (done_event_ != nullptr) (void)cudaEventDestroy(done_event_);
}

void NcclWork::fail(std::exception_ptr e) {
  error_ = std::move(e);
  complete_ = true;
  state_->failed = true;
}

bool NcclWork::poll() {
  if (complete_) return true;
  const cudaError_t e = cudaEventQuery(done_event_);
  if (e == cudaSuccess) {
    complete_ = true;
    return true;
  }
  if (e != cudaErrorNotReady) {
    (void)cudaGetLastError();
    fail(std::make_exception_ptr(cuda_detail::cuda_error(e, "cudaEventQuery (end of " + what_ + ")")));
    return true;
  }
  // Still running: has NCCL met an asynchronous error (a peer gone, a network failure)?
  ncclResult_t async_rc = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(state_->comm, &async_rc);
  const ncclResult_t bad = rc != ncclSuccess ? rc : async_rc;
  if (bad != ncclSuccess && bad != ncclInProgress) {
    fail(std::make_exception_ptr(CommError(::axonn::detail::concat(
        what_, ": NCCL reported an asynchronous error: ", ncclGetErrorString(bad), " (",
        ncclGetLastError(state_->comm), "); the communicator will be aborted when destroyed"))));
    return true;
  }
  return false;
}

void NcclWork::wait() {
  waited_ = true;
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0; !poll(); ++spins) {
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (state_->timeout_s > 0 && waited_s >= state_->timeout_s) {
      fail(std::make_exception_ptr(CommError(::axonn::detail::concat(
          what_, ": not complete after ", state_->timeout_s,
          " s (a rank that died, or ranks that issued different collectives); the communicator will be "
          "aborted when destroyed"))));
      break;
    }
    // Spin briefly for short collectives, then poll gently.
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (error_) std::rethrow_exception(error_);
}

bool NcclWork::test() { return poll(); }

void NcclWork::wait_on(void* stream) {
  // Nothing to wait for once complete; an error already met is rethrown (as wait() would).
  if (poll()) {
    waited_ = true;
    if (error_) std::rethrow_exception(error_);
    return;
  }
  // The consumer's stream waits for the end event on the device; the host goes on. The event may be
  // destroyed with this Work right after: the wait already queued keeps what it captured.
  cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : state_->compute;
  DeviceGuard guard(state_->device);
  AXONN_CUDA_CHECK(cudaStreamWaitEvent(s, done_event_, 0));
  // Handed over to the device: destroying this Work no longer blocks the host. An asynchronous NCCL
  // error from here on surfaces at the communicator's next collective (launch() polls for it).
  waited_ = true;
}

// --- NcclCommunicator -------------------------------------------------------------------------

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, const NcclOptions& options)
    : host_(std::move(host)), options_(options), state_(std::make_shared<NcclState>()) {
  AXONN_CHECK(host_ != nullptr, "NcclCommunicator needs a host communicator");
  const std::string what = "creating NCCL communicator '" + host_->name() + "'";
  AXONN_CHECK_ARG(options.timeout_s >= 0, what, ": timeout_s must be >= 0 (0 = no timeout), got ",
                  options.timeout_s);

  // Every rank needs a device. Agree on it over the host group first, so that a rank without one
  // makes every rank throw instead of leaving the others blocked in NCCL's bootstrap.
  const int devices = cuda_detail::device_count();
  int32_t missing = devices == 0 ? 1 : 0;
  host_->all_reduce(&missing, 1, DType::kI32, ReduceOp::kMax);  // over the host group
  if (missing != 0)
    throw CudaError(::axonn::detail::concat(what, ": a rank of the group has no CUDA device (this rank sees ",
                                            devices, "); NCCL needs one device per rank"));
  AXONN_CUDA_CHECK(cudaGetDevice(&state_->device));
  state_->name = host_->name();
  state_->timeout_s = options.timeout_s;
  // By default the buffers are produced and consumed by the kernels, on this device's compute stream.
  state_->compute = options.compute_stream != nullptr ? static_cast<cudaStream_t>(options.compute_stream)
                                                      : cuda_detail::compute_stream(state_->device);

  // NCCL's unique id, made by rank 0 and broadcast over the host group with its status, so that a
  // failure on rank 0 fails every rank alike.
  std::array<int32_t, 1 + kIdWords> packet{};
  if (rank() == 0) {
    ncclUniqueId id;
    const ncclResult_t rc = ncclGetUniqueId(&id);
    packet[0] = static_cast<int32_t>(rc);
    if (rc == ncclSuccess) std::memcpy(&packet[1], &id, sizeof id);
  }
  host_->broadcast(packet.data(), packet.size(), DType::kI32, 0);  // over the host group
  if (packet[0] != ncclSuccess)
    throw CommError(::axonn::detail::concat(what, ": ncclGetUniqueId failed on rank 0: ",
                                            ncclGetErrorString(static_cast<ncclResult_t>(packet[0]))));
  ncclUniqueId id;
  std::memcpy(&id, &packet[1], sizeof id);

  // Join. Blocks until every rank of the group has called it.
  const ncclResult_t rc = ncclCommInitRank(&state_->comm, size(), id, rank());
  if (rc != ncclSuccess) state_->comm = nullptr;
  int32_t init_failed = rc != ncclSuccess ? 1 : 0;
  host_->all_reduce(&init_failed, 1, DType::kI32, ReduceOp::kMax);  // over the host group
  if (rc != ncclSuccess) throw_nccl(rc, "ncclCommInitRank", what, nullptr, std::source_location::current());
  if (init_failed != 0) {
    state_->failed = true;  // abort our half-made communicator
    throw CommError(what + ": ncclCommInitRank failed on another rank of the group");
  }

  // The collectives' own stream: non-blocking (no implicit sync with other streams, so kernels on
  // the compute stream overlap with communication), at the highest priority (communication kernels should
  // get SMs as soon as they are ready, not queue behind compute).
  int least = 0, greatest = 0;
  AXONN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  AXONN_CUDA_CHECK(cudaStreamCreateWithPriority(&state_->stream, cudaStreamNonBlocking, greatest));
  AXONN_CUDA_CHECK(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming));
  state_->barrier_word = cuda_detail::DeviceBuffer(sizeof(float));
  state_->barrier_word.zero();
  log_debug("%s: rank %d of %d on device %d", what.c_str(), rank(), size(), state_->device);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, std::string name) {
  DeviceGuard guard(state_->device);
  auto host = host_->split(color, key, std::move(name));  // collective over this group
  if (host == nullptr) return nullptr;
  return std::make_unique<NcclCommunicator>(std::move(host), options_);  // collective over the new group
}

std::unique_ptr<Communicator> NcclCommunicator::dup(std::string name) {
  DeviceGuard guard(state_->device);
  return std::make_unique<NcclCommunicator>(host_->dup(std::move(name)), options_);
}

std::string NcclCommunicator::describe(const char* collective, size_t count, DType dtype) const {
  return ::axonn::detail::concat(collective, " of ", count, " ", dtype_name(dtype), " on NCCL communicator '",
                                 name(), "'");
}

template <typename Enqueue>
std::unique_ptr<Work> NcclCommunicator::launch(std::string what, bool async, Enqueue&& enqueue) {
  if (state_->failed)
    throw CommError(what + ": the communicator failed earlier (a collective errored or timed out); destroy it");
  DeviceGuard guard(state_->device);
  // A collective that was waited on the device only (Work::wait_on) reports NCCL's asynchronous
  // errors nowhere else: check before queuing more behind it.
  ncclResult_t async_rc = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(state_->comm, &async_rc);
  const ncclResult_t bad = rc != ncclSuccess ? rc : async_rc;
  if (bad != ncclSuccess && bad != ncclInProgress) {
    state_->failed = true;
    throw CommError(::axonn::detail::concat(what, ": NCCL reported an asynchronous error on this communicator: ",
                                            ncclGetErrorString(bad), " (", ncclGetLastError(state_->comm),
                                            "); destroy it (it will be aborted)"));
  }
  // After everything queued so far on the compute stream (the producers of the send buffers).
  AXONN_CUDA_CHECK(cudaEventRecord(state_->ready, state_->compute));
  AXONN_CUDA_CHECK(cudaStreamWaitEvent(state_->stream, state_->ready, 0));
  enqueue(state_->comm, state_->stream);
  cudaEvent_t done = nullptr;
  AXONN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  auto work = std::make_unique<NcclWork>(state_, done, std::move(what));  // owns `done` from here
  AXONN_CUDA_CHECK(cudaEventRecord(done, state_->stream));
  if (!async) {
    work->wait();
    return nullptr;
  }
  return work;
}

std::unique_ptr<Work> NcclCommunicator::do_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                                      bool async) {
  const std::string what = describe("all_reduce", count, dtype);
  const NcclType t = nccl_type(dtype, true, what);
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclAllReduce(buf, buf, count * t.scale, t.type, nccl_op(op), comm, s), what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_all_gather(const void* send, void* recv, size_t count, DType dtype,
                                                      bool async) {
  const std::string what = describe("all_gather", count, dtype);
  const NcclType t = nccl_type(dtype, false, what);
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclAllGather(send, recv, count * t.scale, t.type, comm, s), what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_all_gather_v(const void* send, void* recv,
                                                        std::span<const size_t> recv_counts, DType dtype,
                                                        bool async) {
  const std::string what = describe("all_gather_v", recv_counts[static_cast<size_t>(rank())], dtype);
  const NcclType t = nccl_type(dtype, false, what);
  const size_t es = dtype_size(dtype);
  // NCCL has no all-gather-v: one broadcast per rank, from its block to the same place everywhere,
  // fused into one launch by a group. Empty blocks are skipped alike on every rank (the counts are
  // the same everywhere).
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclGroupStart(), what, comm);
    ncclResult_t first = ncclSuccess;
    size_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      const size_t n = recv_counts[static_cast<size_t>(r)];
      char* dst = static_cast<char*>(recv) + offset * es;
      if (n > 0 && first == ncclSuccess)
        first = ncclBroadcast(r == rank() ? send : dst, dst, n * t.scale, t.type, r, comm, s);
      offset += n;
    }
    const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
    AXONN_NCCL_CHECK(first, what, comm);
    AXONN_NCCL_CHECK(end, what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                                          DType dtype, ReduceOp op, bool async) {
  const std::string what = describe("reduce_scatter", recv_count, dtype);
  const NcclType t = nccl_type(dtype, true, what);
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclReduceScatter(send, recv, recv_count * t.scale, t.type, nccl_op(op), comm, s), what,
                     comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_broadcast(void* buf, size_t count, DType dtype, int root, bool async) {
  const std::string what = describe("broadcast", count, dtype);
  const NcclType t = nccl_type(dtype, false, what);
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclBroadcast(buf, buf, count * t.scale, t.type, root, comm, s), what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_all_to_all(const void* send, void* recv, size_t count, DType dtype,
                                                      bool async) {
  const std::string what = describe("all_to_all", count, dtype);
  const NcclType t = nccl_type(dtype, false, what);
  const size_t block = count * dtype_size(dtype);
  const auto me = static_cast<size_t>(rank());
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    // Our own block is a device copy on the same stream; the others are point-to-point in a group.
    AXONN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(recv) + me * block,
                                     static_cast<const char*>(send) + me * block, block,
                                     cudaMemcpyDeviceToDevice, s));
    AXONN_NCCL_CHECK(ncclGroupStart(), what, comm);
    ncclResult_t first = ncclSuccess;
    for (int j = 0; j < size() && first == ncclSuccess; ++j) {
      if (static_cast<size_t>(j) == me) continue;
      const size_t off = static_cast<size_t>(j) * block;
      first = ncclSend(static_cast<const char*>(send) + off, count * t.scale, t.type, j, comm, s);
      if (first == ncclSuccess) first = ncclRecv(static_cast<char*>(recv) + off, count * t.scale, t.type, j, comm, s);
    }
    const ncclResult_t end = ncclGroupEnd();
    AXONN_NCCL_CHECK(first, what, comm);
    AXONN_NCCL_CHECK(end, what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                                        void* recv, std::span<const size_t> recv_counts,
                                                        DType dtype, bool async) {
  const auto me = static_cast<size_t>(rank());
  const std::string what = describe("all_to_all_v", send_counts[me], dtype);
  AXONN_CHECK_ARG(send_counts[me] == recv_counts[me], what, ": rank ", rank(), " sends ", send_counts[me],
                  " elements to itself but expects ", recv_counts[me]);
  const NcclType t = nccl_type(dtype, false, what);
  const size_t es = dtype_size(dtype);
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    size_t send_off = 0, recv_off = 0;
    for (size_t j = 0; j < me; ++j) {
      send_off += send_counts[j];
      recv_off += recv_counts[j];
    }
    AXONN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(recv) + recv_off * es,
                                     static_cast<const char*>(send) + send_off * es, send_counts[me] * es,
                                     cudaMemcpyDeviceToDevice, s));
    AXONN_NCCL_CHECK(ncclGroupStart(), what, comm);
    ncclResult_t first = ncclSuccess;
    send_off = recv_off = 0;
    for (size_t j = 0; j < send_counts.size() && first == ncclSuccess; ++j) {
      // send_counts[j] here equals recv_counts[me] on rank j: both sides skip an empty pair.
      const int peer = static_cast<int>(j);
      if (j != me && send_counts[j] > 0)
        first = ncclSend(static_cast<const char*>(send) + send_off * es, send_counts[j] * t.scale, t.type, peer,
                         comm, s);
      if (j != me && recv_counts[j] > 0 && first == ncclSuccess)
        first = ncclRecv(static_cast<char*>(recv) + recv_off * es, recv_counts[j] * t.scale, t.type, peer, comm, s);
      send_off += send_counts[j];
      recv_off += recv_counts[j];
    }
    const ncclResult_t end = ncclGroupEnd();
    AXONN_NCCL_CHECK(first, what, comm);
    AXONN_NCCL_CHECK(end, what, comm);
  });
}

std::unique_ptr<Work> NcclCommunicator::do_barrier(bool async) {
  // An all-reduce of one word: complete on a rank only once every rank has entered it.
  const std::string what = "barrier on NCCL communicator '" + name() + "'";
  float* word = state_->barrier_word.as<float>();
  return launch(what, async, [&](ncclComm_t comm, cudaStream_t s) {
    AXONN_NCCL_CHECK(ncclAllReduce(word, word, 1, ncclFloat32, ncclSum, comm, s), what, comm);
  });
}

void NcclCommunicator::copy_local(void* dst, const void* src, size_t bytes) {
  // A group of one: the copy goes on the compute stream, in order with the buffers' producers and
  // consumers (no host wait needed; DeviceBuffer::download, on the same stream, will see it).
  DeviceGuard guard(state_->device);
  AXONN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, state_->compute));
}

}  // namespace axonn::comm::detail
