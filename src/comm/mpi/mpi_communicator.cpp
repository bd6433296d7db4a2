#include "mpi_communicator.hpp"

#include "../reduce_kernels.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "mpi_error.hpp"

namespace axonn::comm {

std::shared_ptr<Communicator> world(const CommOptions& options) {
  auto ctx = std::make_shared<detail::MpiContext>(options);
  // Our own copy of the world: its collectives never mix with other libraries' on MPI_COMM_WORLD.
  MPI_Comm comm = MPI_COMM_NULL;
  AXONN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "duplicating MPI_COMM_WORLD");
  return std::make_shared<detail::MpiCommunicator>(std::move(ctx), comm, "world");
}

}  // namespace axonn::comm

namespace axonn::comm::detail {
namespace {

// Counts were checked against INT_MAX by Communicator before reaching the backend.
int to_int(size_t n) { return static_cast<int>(n); }

// Per-rank counts and their prefix sums, as MPI's v-collectives want them.
void counts_and_displs(std::span<const size_t> c, std::vector<int>& counts,
                       std::vector<int>& displs) {
  counts.resize(c.size());
  displs.resize(c.size());
  int offset = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    counts[i] = to_int(c[i]);
    displs[i] = offset;
    offset += counts[i];
  }
}

// kAvg: MPI sums, then every rank divides its result by the group size.
std::function<void()> avg_step(ReduceOp op, void* buf, size_t count, DType dtype, int size) {
  if (op != ReduceOp::kAvg) return {};
  return [=] { divide_in_place(buf, count, dtype, size); };
}

}  // namespace

MpiCommunicator::MpiCommunicator(std::shared_ptr<MpiContext> ctx, MPI_Comm comm, std::string name)
    : ctx_(std::move(ctx)), comm_(comm), name_(std::move(name)) {
  AXONN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "communicator '" + name_ + "'");
  AXONN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_), "communicator '" + name_ + "'");
  AXONN_MPI_CHECK(MPI_Comm_size(comm_, &size_), "communicator '" + name_ + "'");
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize nothing can be freed; the communicator was destroyed too late.
  if (!mpi_alive()) return;
  const auto in_mpi = ctx_->enter_mpi();
  MPI_Comm_free(&comm_);
}

std::string MpiCommunicator::describe(const char* collective, size_t count, DType dtype) const {
  return ::axonn::detail::concat(collective, " of ", count, " ", dtype_name(dtype), " on communicator '", name_,
                "'");
}

WaitInfo MpiCommunicator::next_call(const char* collective, size_t count, DType dtype) {
  WaitInfo w;
  w.collective = collective;
  w.count = count;
  w.dtype = dtype;
  w.group = &name_;
  w.call = ++calls_;
  return w;
}

WaitInfo MpiCommunicator::next_call(const char* collective) {
  WaitInfo w = next_call(collective, 0, DType::kF32);
  w.counted = false;
  return w;
}

std::shared_ptr<PendingOp> MpiCommunicator::pending(std::string what) const {
  auto op = std::make_shared<PendingOp>();
  op->what = std::move(what);
  return op;
}

std::unique_ptr<Work> MpiCommunicator::started(std::shared_ptr<PendingOp> op) {
  if (ctx_->has_progress_thread()) ctx_->submit(op);
  return std::make_unique<MpiWork>(ctx_, std::move(op));
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, std::string name) {
  const auto in_mpi = ctx_->enter_mpi();
  MPI_Comm comm = MPI_COMM_NULL;
  WaitScope deadline(ctx_->watchdog(), next_call("split"));
  AXONN_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &comm),
                  "splitting communicator '" + name_ + "' into '" + name + "'");
  if (comm == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(ctx_, comm, std::move(name));
}

std::unique_ptr<Communicator> MpiCommunicator::dup(std::string name) {
  const auto in_mpi = ctx_->enter_mpi();
  MPI_Comm comm = MPI_COMM_NULL;
  WaitScope deadline(ctx_->watchdog(), next_call("dup"));
  AXONN_MPI_CHECK(MPI_Comm_dup(comm_, &comm),
                  "duplicating communicator '" + name_ + "' as '" + name + "'");
  return std::make_unique<MpiCommunicator>(ctx_, comm, std::move(name));
}

// Each collective below: blocking -> MPI's blocking call on this thread; async -> MPI's I-call
// started here (program order), then owned by the progress thread. Either way this thread holds
// the right to call MPI (enter_mpi) until it returns.

std::unique_ptr<Work> MpiCommunicator::do_all_reduce(void* buf, size_t count, DType dtype,
                                                     ReduceOp op, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  const MPI_Op mop = ctx_->op(dtype, op);
  auto after = avg_step(op, buf, count, dtype, size_);
  const WaitInfo call = next_call("all_reduce", count, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, to_int(count), t, mop, comm_),
                    describe("all_reduce", count, dtype));
    if (after) after();
    return nullptr;
  }
  auto p = pending(describe("all_reduce", count, dtype));
  p->wait = call;
  p->on_complete = std::move(after);
  AXONN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, to_int(count), t, mop, comm_, &p->request),
                  p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_all_gather(const void* send, void* recv, size_t count,
                                                     DType dtype, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  const auto* mine = static_cast<const char*>(recv) + static_cast<size_t>(rank_) * count * dtype_size(dtype);
  const void* sbuf = send == mine ? MPI_IN_PLACE : send;
  const int n = to_int(count);
  const WaitInfo call = next_call("all_gather", count, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Allgather(sbuf, n, t, recv, n, t, comm_), describe("all_gather", count, dtype));
    return nullptr;
  }
  auto p = pending(describe("all_gather", count, dtype));
  p->wait = call;
  AXONN_MPI_CHECK(MPI_Iallgather(sbuf, n, t, recv, n, t, comm_, &p->request), p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_all_gather_v(const void* send, void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  auto p = pending(describe("all_gather_v", recv_counts[static_cast<size_t>(rank_)], dtype));
  counts_and_displs(recv_counts, p->counts, p->displs);
  const int n = p->counts[static_cast<size_t>(rank_)];
  p->wait = next_call("all_gather_v", recv_counts[static_cast<size_t>(rank_)], dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), p->wait);
    AXONN_MPI_CHECK(MPI_Allgatherv(send, n, t, recv, p->counts.data(), p->displs.data(), t, comm_),
                    p->what);
    return nullptr;
  }
  AXONN_MPI_CHECK(MPI_Iallgatherv(send, n, t, recv, p->counts.data(), p->displs.data(), t, comm_,
                                  &p->request),
                  p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_reduce_scatter(const void* send, void* recv,
                                                         size_t recv_count, DType dtype,
                                                         ReduceOp op, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  const MPI_Op mop = ctx_->op(dtype, op);
  auto after = avg_step(op, recv, recv_count, dtype, size_);
  const int n = to_int(recv_count);
  const WaitInfo call = next_call("reduce_scatter", recv_count, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, t, mop, comm_),
                    describe("reduce_scatter", recv_count, dtype));
    if (after) after();
    return nullptr;
  }
  auto p = pending(describe("reduce_scatter", recv_count, dtype));
  p->wait = call;
  p->on_complete = std::move(after);
  AXONN_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, n, t, mop, comm_, &p->request), p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_broadcast(void* buf, size_t count, DType dtype, int root,
                                                    bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  const WaitInfo call = next_call("broadcast", count, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Bcast(buf, to_int(count), t, root, comm_), describe("broadcast", count, dtype));
    return nullptr;
  }
  auto p = pending(describe("broadcast", count, dtype));
  p->wait = call;
  AXONN_MPI_CHECK(MPI_Ibcast(buf, to_int(count), t, root, comm_, &p->request), p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_all_to_all(const void* send, void* recv, size_t count,
                                                     DType dtype, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  const int n = to_int(count);
  const WaitInfo call = next_call("all_to_all", count, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Alltoall(send, n, t, recv, n, t, comm_), describe("all_to_all", count, dtype));
    return nullptr;
  }
  auto p = pending(describe("all_to_all", count, dtype));
  p->wait = call;
  AXONN_MPI_CHECK(MPI_Ialltoall(send, n, t, recv, n, t, comm_, &p->request), p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_all_to_all_v(const void* send,
                                                       std::span<const size_t> send_counts,
                                                       void* recv,
                                                       std::span<const size_t> recv_counts,
                                                       DType dtype, bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const MPI_Datatype t = ctx_->datatype(dtype);
  size_t total = 0;
  for (size_t c : send_counts) total += c;
  auto p = pending(describe("all_to_all_v", total, dtype));
  counts_and_displs(send_counts, p->counts, p->displs);
  counts_and_displs(recv_counts, p->counts2, p->displs2);
  p->wait = next_call("all_to_all_v", total, dtype);
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), p->wait);
    AXONN_MPI_CHECK(MPI_Alltoallv(send, p->counts.data(), p->displs.data(), t, recv,
                                  p->counts2.data(), p->displs2.data(), t, comm_),
                    p->what);
    return nullptr;
  }
  AXONN_MPI_CHECK(MPI_Ialltoallv(send, p->counts.data(), p->displs.data(), t, recv,
                                 p->counts2.data(), p->displs2.data(), t, comm_, &p->request),
                  p->what);
  return started(std::move(p));
}

std::unique_ptr<Work> MpiCommunicator::do_barrier(bool async) {
  const auto in_mpi = ctx_->enter_mpi();
  const std::string what = "barrier on communicator '" + name_ + "'";
  const WaitInfo call = next_call("barrier");
  if (!async) {
    WaitScope deadline(ctx_->watchdog(), call);
    AXONN_MPI_CHECK(MPI_Barrier(comm_), what);
    return nullptr;
  }
  auto p = pending(what);
  p->wait = call;
  AXONN_MPI_CHECK(MPI_Ibarrier(comm_, &p->request), p->what);
  return started(std::move(p));
}

}  // namespace axonn::comm::detail
