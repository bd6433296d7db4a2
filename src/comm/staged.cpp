// comm/staged.cpp — the MPI-staged device communicator (comm/staged.hpp): each collective copies
// device -> host staging buffer, runs the host communicator's collective on the staging buffer, and
// copies host -> device.
#include "axonn/comm/staged.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <new>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"

namespace axonn::comm {
namespace {

// --- the memcpy copier ----------------------------------------------------------------------

constexpr std::align_val_t kHostAlign{64};

class HostCopier final : public StagingCopier {
 public:
  void* allocate_host(size_t bytes) override { return ::operator new(bytes, kHostAlign); }
  void free_host(void* p) noexcept override { ::operator delete(p, kHostAlign); }
  void to_host(void* host, const void* device, size_t bytes) override { std::memcpy(host, device, bytes); }
  void to_device(void* device, const void* host, size_t bytes) override { std::memcpy(device, host, bytes); }
  void device_copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
};

// --- staging buffers --------------------------------------------------------------------------

// The staging buffers of one communicator: a free list. A collective takes one buffer for as long
// as it is in flight, so two collectives in flight never share one; a buffer that is too small is
// freed and replaced by a larger one (they grow to the largest collective seen). Shared with the
// Works, which may outlive the communicator.
class StagingPool {
 public:
  explicit StagingPool(std::shared_ptr<StagingCopier> copier) : copier_(std::move(copier)) {}
  ~StagingPool() {
    for (const Block& b : free_) copier_->free_host(b.data);
  }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Block {
    char* data = nullptr;
    size_t bytes = 0;
  };

  // The smallest free block of at least `bytes`; else a new one (replacing the largest free block,
  // which is too small, so the pool does not keep blocks that can no longer serve).
  Block acquire(size_t bytes) {
    std::lock_guard lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    if (best != free_.end()) {
      const Block b = *best;
      free_.erase(best);
      return b;
    }
    if (!free_.empty()) {
      auto largest = std::max_element(free_.begin(), free_.end(),
                                      [](const Block& a, const Block& b) { return a.bytes < b.bytes; });
      copier_->free_host(largest->data);
      free_.erase(largest);
    }
    return Block{static_cast<char*>(copier_->allocate_host(bytes)), bytes};
  }
  void release(Block b) {
    std::lock_guard lock(mu_);
    free_.push_back(b);
  }
  StagingCopier& copier() { return *copier_; }

 private:
  std::shared_ptr<StagingCopier> copier_;
  std::mutex mu_;
  std::vector<Block> free_;
};

// One collective's hold on a staging block, carved into aligned regions (send, receive).
class Lease {
 public:
  Lease(std::shared_ptr<StagingPool> pool, std::initializer_list<size_t> region_bytes) : pool_(std::move(pool)) {
    size_t total = 0;
    for (size_t r : region_bytes) {
      offsets_.push_back(total);
      total += round_up(r);
    }
    block_ = pool_->acquire(std::max<size_t>(total, kAlign));
  }
  ~Lease() { release(); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  char* region(size_t i) const { return block_.data + offsets_.at(i); }
  // Back to the pool: only once no copy or host collective uses the block any more.
  void release() {
    if (block_.data != nullptr) pool_->release(block_);
    block_ = {};
  }
  // After a failure a queued copy may still use the block: never reuse it (a leak, on errors only).
  void abandon() { block_ = {}; }

 private:
  static constexpr size_t kAlign = 256;
  static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  std::shared_ptr<StagingPool> pool_;
  std::vector<size_t> offsets_;
  StagingPool::Block block_;
};

// Device -> staging, complete before the host collective reads it (it also orders after the device
// work that produced `device`, queued before on the copier's stream).
void stage_in(StagingCopier& copier, void* host, const void* device, size_t bytes) {
  if (bytes > 0) copier.to_host(host, device, bytes);
  copier.synchronize();
}
// Staging -> device, complete before the staging block can be reused. Called from the Work, which
// may outlive the communicator: it holds the copier, never the communicator.
void stage_out(StagingCopier& copier, void* device, const void* host, size_t bytes) {
  if (bytes > 0) copier.to_device(device, host, bytes);
  copier.synchronize();
}

// --- the Work -----------------------------------------------------------------------------------

// The host collective's Work, then the copy back (`finish`), then the staging block back to the pool.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> host, std::unique_ptr<Lease> lease, std::function<void()> finish,
             std::string what)
      : host_(std::move(host)), lease_(std::move(lease)), finish_(std::move(finish)), what_(std::move(what)) {}
  ~StagedWork() override {
    if (!done_) {
      try {
        wait();
      } catch (const std::exception& e) {
        log_warn("%s: a Work destroyed without wait() failed: %s", what_.c_str(), e.what());
      }
    }
  }

  void wait() override {
    if (!done_) {
      try {
        host_->wait();
        complete();
      } catch (...) {
        fail(std::current_exception());
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

  bool test() override {
    if (done_) return true;
    try {
      if (!host_->test()) return false;
      host_->wait();  // complete: returns at once, or rethrows the host collective's error
      complete();
    } catch (...) {
      fail(std::current_exception());
    }
    return true;
  }

 private:
  void complete() {
    finish_();  // queues the copies back and synchronizes
    lease_->release();
    done_ = true;
  }
  void fail(std::exception_ptr e) {
    error_ = std::move(e);
    lease_->abandon();
    done_ = true;
  }

  std::unique_ptr<Work> host_;
  std::unique_ptr<Lease> lease_;
  std::function<void()> finish_;
  std::string what_;
  bool done_ = false;
  std::exception_ptr error_;
};

// --- the communicator ---------------------------------------------------------------------------

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::shared_ptr<Communicator> host, std::shared_ptr<StagingCopier> copier)
      : host_(std::move(host)), copier_(std::move(copier)), pool_(std::make_shared<StagingPool>(copier_)) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override {
    std::shared_ptr<Communicator> h = host_->split(color, key, std::move(name));  // collective over host
    if (h == nullptr) return nullptr;
    return std::make_unique<StagedCommunicator>(std::move(h), copier_);
  }
  std::unique_ptr<Communicator> dup(std::string name) override {
    return std::make_unique<StagedCommunicator>(std::shared_ptr<Communicator>(host_->dup(std::move(name))),
                                                copier_);
  }

 protected:
  std::unique_ptr<Work> do_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op, bool async) override {
    const size_t bytes = count * dtype_size(dtype);
    auto lease = lease_of({bytes});
    char* h = lease->region(0);
    stage_in(*copier_, h, buf, bytes);
    auto work = host_->all_reduce_async(h, count, dtype, op);
    return finish("all_reduce", count, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, buf, h, bytes] { stage_out(*c, buf, h, bytes); });
  }

  std::unique_ptr<Work> do_all_gather(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override {
    // Always in place on the host: our block goes to its place in the receive region. This also
    // covers the device call in place (send == recv + rank*block).
    const size_t block = count * dtype_size(dtype);
    const size_t total = block * static_cast<size_t>(size());
    auto lease = lease_of({total});
    char* h = lease->region(0);
    char* mine = h + static_cast<size_t>(rank()) * block;
    stage_in(*copier_, mine, send, block);
    auto work = host_->all_gather_async(mine, h, count, dtype);
    return finish("all_gather", count, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, recv, h, total] { stage_out(*c, recv, h, total); });
  }

  std::unique_ptr<Work> do_all_gather_v(const void* send, void* recv, std::span<const size_t> recv_counts,
                                        DType dtype, bool async) override {
    const size_t es = dtype_size(dtype);
    const size_t send_count = recv_counts[static_cast<size_t>(rank())];
    const size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0}) * es;
    auto lease = lease_of({send_count * es, total});
    char* hs = lease->region(0);
    char* hr = lease->region(1);
    stage_in(*copier_, hs, send, send_count * es);
    auto work = host_->all_gather_v_async(hs, send_count, hr, recv_counts, dtype);  // copies the counts
    return finish("all_gather_v", send_count, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, recv, hr, total] { stage_out(*c, recv, hr, total); });
  }

  std::unique_ptr<Work> do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                          ReduceOp op, bool async) override {
    const size_t block = recv_count * dtype_size(dtype);
    const size_t total = block * static_cast<size_t>(size());
    auto lease = lease_of({total, block});
    char* hs = lease->region(0);
    char* hr = lease->region(1);
    stage_in(*copier_, hs, send, total);
    auto work = host_->reduce_scatter_async(hs, hr, recv_count, dtype, op);
    return finish("reduce_scatter", recv_count, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, recv, hr, block] { stage_out(*c, recv, hr, block); });
  }

  std::unique_ptr<Work> do_broadcast(void* buf, size_t count, DType dtype, int root, bool async) override {
    const size_t bytes = count * dtype_size(dtype);
    auto lease = lease_of({bytes});
    char* h = lease->region(0);
    const bool is_root = rank() == root;
    if (is_root) stage_in(*copier_, h, buf, bytes);  // the others' staging is overwritten by the broadcast
    auto work = host_->broadcast_async(h, count, dtype, root);
    return finish("broadcast", count, dtype, std::move(work), std::move(lease), async, [c = copier_, buf, h, bytes, is_root] {
      if (!is_root) stage_out(*c, buf, h, bytes);  // the root's buffer already holds the data
    });
  }

  std::unique_ptr<Work> do_all_to_all(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override {
    const size_t total = count * dtype_size(dtype) * static_cast<size_t>(size());
    auto lease = lease_of({total, total});
    char* hs = lease->region(0);
    char* hr = lease->region(1);
    stage_in(*copier_, hs, send, total);
    auto work = host_->all_to_all_async(hs, hr, count, dtype);
    return finish("all_to_all", count, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, recv, hr, total] { stage_out(*c, recv, hr, total); });
  }

  std::unique_ptr<Work> do_all_to_all_v(const void* send, std::span<const size_t> send_counts, void* recv,
                                        std::span<const size_t> recv_counts, DType dtype, bool async) override {
    const size_t es = dtype_size(dtype);
    const size_t send_total = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0}) * es;
    const size_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0}) * es;
    auto lease = lease_of({send_total, recv_total});
    char* hs = lease->region(0);
    char* hr = lease->region(1);
    stage_in(*copier_, hs, send, send_total);
    auto work = host_->all_to_all_v_async(hs, send_counts, hr, recv_counts, dtype);  // copies the counts
    return finish("all_to_all_v", send_total / es, dtype, std::move(work), std::move(lease), async,
                  [c = copier_, recv, hr, recv_total] { stage_out(*c, recv, hr, recv_total); });
  }

  std::unique_ptr<Work> do_barrier(bool async) override {
    if (!async) {
      host_->barrier();
      return nullptr;
    }
    return host_->barrier_async();
  }

  void copy_local(void* dst, const void* src, size_t bytes) override { copier_->device_copy(dst, src, bytes); }

 private:
  std::unique_ptr<Lease> lease_of(std::initializer_list<size_t> regions) {
    return std::make_unique<Lease>(pool_, regions);
  }

  // Blocking: wait for the host collective, copy back, release the staging block. Asynchronous: a
  // Work that does the same when waited. A failure before the copy back abandons the block.
  std::unique_ptr<Work> finish(const char* collective, size_t count, DType dtype, std::unique_ptr<Work> host_work,
                               std::unique_ptr<Lease> lease, bool async, std::function<void()> copy_back) {
    const std::string what = ::axonn::detail::concat(collective, " of ", count, " ", dtype_name(dtype),
                                                     " on staged communicator '", name(), "'");
    auto work = std::make_unique<StagedWork>(std::move(host_work), std::move(lease), std::move(copy_back), what);
    if (async) return work;
    work->wait();
    return nullptr;
  }

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<StagingCopier> copier_;
  std::shared_ptr<StagingPool> pool_;
};

}  // namespace

std::shared_ptr<StagingCopier> host_copier() { return std::make_shared<HostCopier>(); }

std::shared_ptr<Communicator> staged_from(std::shared_ptr<Communicator> host, std::shared_ptr<StagingCopier> copier) {
  AXONN_CHECK_ARG(host != nullptr, "staged_from: the host communicator is null");
  AXONN_CHECK_ARG(copier != nullptr, "staged_from: the staging copier is null (host_copier(), or the CUDA one "
                  "from comm/cuda.hpp)");
  return std::make_shared<StagedCommunicator>(std::move(host), std::move(copier));
}

}  // namespace axonn::comm
