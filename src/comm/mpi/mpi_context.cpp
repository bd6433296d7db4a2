#include "mpi_context.hpp"

#include <chrono>

#include "../reduce_kernels.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "mpi_error.hpp"

namespace axonn::comm::detail {
namespace {

// User-defined MPI operations on bf16 (MPI's signature; len is in elements of our bf16 type).
void bf16_sum_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_sum(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), static_cast<size_t>(*len));
}
void bf16_max_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_max(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), static_cast<size_t>(*len));
}

}  // namespace

bool mpi_alive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// --- PendingOp --------------------------------------------------------------------------------

void PendingOp::complete(int mpi_rc) {
  std::exception_ptr err;
  if (mpi_rc != MPI_SUCCESS) {
    err = std::make_exception_ptr(mpi_error(mpi_rc, "MPI_Test", what));
  } else if (on_complete) {
    try {
      on_complete();
    } catch (...) {
      err = std::current_exception();
    }
  }
  {
    std::lock_guard lock(mu);
    error = err;
    done = true;
  }
  cv.notify_all();
}

bool PendingOp::is_done() {
  std::lock_guard lock(mu);
  return done;
}

void PendingOp::wait_done() {
  std::unique_lock lock(mu);
  cv.wait(lock, [this] { return done; });
}

// --- MpiWork ----------------------------------------------------------------------------------

void MpiWork::wait() {
  WaitScope deadline(ctx_->watchdog(), op_->wait);
  if (ctx_->has_progress_thread()) {
    ctx_->add_waiter();
    op_->wait_done();
    ctx_->remove_waiter();
  } else if (!op_->is_done()) {
    MPI_Status status;
    int rc = MPI_SUCCESS;
    {
      const auto in_mpi = ctx_->enter_mpi();
      rc = MPI_Wait(&op_->request, &status);
    }
    op_->complete(rc);
  }
  std::lock_guard lock(op_->mu);
  if (op_->error) std::rethrow_exception(op_->error);
}

bool MpiWork::test() {
  if (op_->is_done()) return true;
  if (ctx_->has_progress_thread()) return false;
  int flag = 0;
  MPI_Status status;
  int rc = MPI_SUCCESS;
  {
    const auto in_mpi = ctx_->enter_mpi();
    rc = MPI_Test(&op_->request, &flag, &status);
  }
  if (rc != MPI_SUCCESS || flag) op_->complete(rc);
  return rc != MPI_SUCCESS || flag;
}

MpiWork::~MpiWork() {
  if (op_->is_done()) return;
  // The buffers may be freed right after this: finish the collective first.
  try {
    wait();
  } catch (const std::exception& e) {
    log_warn("a Work destroyed without wait() failed: %s", e.what());
  }
}

// --- MpiContext -------------------------------------------------------------------------------

MpiContext::MpiContext(const CommOptions& options) : options_(options) {
  AXONN_CHECK(mpi_alive(), "MPI is not initialised: construct an axonn::comm::Runtime first");
  AXONN_MPI_CHECK(MPI_Type_contiguous(1, MPI_UINT16_T, &bf16_type_), "creating the bf16 datatype");
  AXONN_MPI_CHECK(MPI_Type_commit(&bf16_type_), "creating the bf16 datatype");
  // Both are commutative: rounding a+b gives the same bits as rounding b+a.
  AXONN_MPI_CHECK(MPI_Op_create(&bf16_sum_fn, 1, &bf16_sum_), "creating the bf16 sum");
  AXONN_MPI_CHECK(MPI_Op_create(&bf16_max_fn, 1, &bf16_max_), "creating the bf16 max");
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (options_.timeout_s > 0) watchdog_ = std::make_unique<Watchdog>(options_.timeout_s, level >= MPI_THREAD_MULTIPLE, mpi_mu_);
  if (options_.progress_thread) {
    if (level < MPI_THREAD_MULTIPLE) {
      log_warn("MPI granted thread level %d, not MPI_THREAD_MULTIPLE: no progress thread; "
               "non-blocking collectives advance only in test() and wait()", level);
    } else {
      thread_ = std::thread([this] { run(); });
    }
  }
}

MpiContext::~MpiContext() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // returns once every submitted collective has completed
  }
  if (mpi_alive()) {
    MPI_Op_free(&bf16_sum_);
    MPI_Op_free(&bf16_max_);
    MPI_Type_free(&bf16_type_);
  }
}

MPI_Datatype MpiContext::datatype(DType t) const {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kBF16: return bf16_type_;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU16: return MPI_UINT16_T;
  }
  AXONN_CHECK(false, "no MPI datatype for dtype ", static_cast<int>(t));
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiContext::op(DType t, ReduceOp op) const {
  // kAvg is a sum here; the division runs at completion.
  if (t == DType::kBF16) return op == ReduceOp::kMax ? bf16_max_ : bf16_sum_;
  return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
}

void MpiContext::submit(std::shared_ptr<PendingOp> op) {
  {
    std::lock_guard lock(mu_);
    incoming_.push_back(std::move(op));
  }
  cv_.notify_one();
}

void MpiContext::run() {
  // Owned by this thread alone: the in-flight ops and their requests, index for index.
  std::vector<std::shared_ptr<PendingOp>> active;
  std::vector<MPI_Request> requests;
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (active.empty()) cv_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
      for (auto& op : incoming_) {
        requests.push_back(op->request);
        active.push_back(std::move(op));
      }
      incoming_.clear();
      if (active.empty() && stop_) return;
    }
    const int n = static_cast<int>(active.size());
    indices.resize(active.size());
    statuses.resize(active.size());
    int completed = 0;
    int rc = MPI_SUCCESS;
    {
      const auto in_mpi = enter_mpi();
      rc = MPI_Testsome(n, requests.data(), &completed, indices.data(), statuses.data());
    }
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      // The call itself failed: nothing can be known about the requests any more; fail them all.
      for (auto& op : active) op->complete(rc);
      active.clear();
      requests.clear();
      continue;
    }
    if (completed == MPI_UNDEFINED) completed = 0;
    for (int i = 0; i < completed; ++i) {
      const auto k = static_cast<size_t>(indices[static_cast<size_t>(i)]);
      active[k]->complete(rc == MPI_ERR_IN_STATUS ? statuses[static_cast<size_t>(i)].MPI_ERROR
                                                  : MPI_SUCCESS);
      active[k].reset();
    }
    if (completed > 0) {
      // Drop the finished ones, keeping the others in issue order.
      size_t j = 0;
      for (size_t k = 0; k < active.size(); ++k) {
        if (!active[k]) continue;
        active[j] = std::move(active[k]);
        requests[j] = requests[k];
        ++j;
      }
      active.resize(j);
      requests.resize(j);
      continue;
    }
    if (waiters_.load() > 0 || options_.poll_interval_us <= 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(options_.poll_interval_us));
    }
  }
}

}  // namespace axonn::comm::detail
