// The MPI-staged communicator's staging logic, on the CPU: staged_from(world, copier) with a host
// "device" must give byte for byte what the plain MPI communicator gives, for every collective and
// dtype, blocking and asynchronous. Two copiers:
//  * host_copier() (the library's memcpy copier): copies at once;
//  * DeferredCopier (below): queues every copy and makes it only at synchronize(), as a GPU stream
//    would. If the staged communicator sent before synchronising its device -> host copy, MPI would
//    send the staging buffer's poison; if it returned before synchronising the copy back, the output
//    would still hold its old contents. Both show as mismatches.
// Also: the node-local rank (all ranks of a test run on one node: local == world).
//
// Values are small integers: sums are exact in every dtype, whatever the reduction order.
// Multi-rank rule: no ASSERT_* before a collective.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/comm/staged.hpp"
#include "axonn/core/error.hpp"

namespace axonn::comm {
namespace {

using Bytes = std::vector<unsigned char>;

// Queues copies until synchronize(); staging memory starts as poison.
class DeferredCopier final : public StagingCopier {
 public:
  void* allocate_host(size_t bytes) override {
    ++allocations;
    void* p = ::operator new(bytes, std::align_val_t{64});
    std::memset(p, 0xA5, bytes);
    return p;
  }
  void free_host(void* p) noexcept override { ::operator delete(p, std::align_val_t{64}); }
  void to_host(void* host, const void* device, size_t bytes) override { queue(host, device, bytes); }
  void to_device(void* device, const void* host, size_t bytes) override { queue(device, host, bytes); }
  void device_copy(void* dst, const void* src, size_t bytes) override { queue(dst, src, bytes); }
  void synchronize() override {
    for (auto& c : pending_) c();
    pending_.clear();
  }
  int allocations = 0;

 private:
  void queue(void* dst, const void* src, size_t bytes) {
    pending_.emplace_back([=] { std::memcpy(dst, src, bytes); });
  }
  std::vector<std::function<void()>> pending_;
};

// Element i of rank r's input, a small integer valid in every dtype (u16 and bf16 included).
Bytes input(DType t, size_t n, int r, int salt = 0) {
  Bytes b(n * dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>((static_cast<size_t>(r) * 7 + i * 3 + static_cast<size_t>(salt)) % 29) + 1;
    void* p = b.data() + i * dtype_size(t);
    switch (t) {
      case DType::kF32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::kBF16: { const uint16_t x = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
      case DType::kI32: { const int32_t x = v; std::memcpy(p, &x, 4); break; }
      case DType::kI64: { const int64_t x = v; std::memcpy(p, &x, 8); break; }
      case DType::kU16: { const uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); break; }
    }
  }
  return b;
}

struct Case {
  DType dtype;
  bool deferred;  // DeferredCopier, else host_copier()
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.dtype)) + (info.param.deferred ? "_deferred" : "_memcpy");
}

class Staged : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().deferred) {
      deferred_ = std::make_shared<DeferredCopier>();
      copier_ = deferred_;
    } else {
      copier_ = host_copier();
    }
    staged_ = staged_from(world_, copier_);
  }
  DType t() const { return GetParam().dtype; }
  bool reduces() const { return t() != DType::kU16; }
  size_t es() const { return dtype_size(t()); }
  int r() const { return world_->rank(); }
  int n() const { return world_->size(); }
  size_t un() const { return static_cast<size_t>(n()); }

  // Runs `op(comm, async)` on the plain communicator and on the staged one, each on its own copy of
  // `buffers` (inputs and outputs), blocking and asynchronous, and checks the outputs are equal.
  void same(const std::string& what, std::vector<Bytes> buffers,
            const std::function<std::unique_ptr<Work>(Communicator&, std::vector<Bytes>&, bool)>& op) {
    for (bool async : {false, true}) {
      std::vector<Bytes> want = buffers, got = buffers;
      auto w1 = op(*world_, want, async);
      if (w1) w1->wait();
      auto w2 = op(*staged_, got, async);
      EXPECT_EQ(w2 != nullptr, async) << what;
      if (w2) {
        w2->wait();
        EXPECT_TRUE(w2->test()) << what;
      }
      // A group of one copies through the copier's device_copy, ordered with later device work
      // but not waited (as on a GPU stream): a reader synchronises first. With more ranks we do not,
      // so a copy back the communicator forgot to wait for shows.
      if (n() == 1) copier_->synchronize();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(want[i] == got[i]) << what << (async ? " (async)" : " (blocking)") << ": buffer " << i
                                       << " differs from the plain MPI communicator's on rank " << r();
    }
  }

  std::shared_ptr<Communicator> world_ = world();
  std::shared_ptr<StagingCopier> copier_;
  std::shared_ptr<DeferredCopier> deferred_;
  std::shared_ptr<Communicator> staged_;
};

TEST_P(Staged, AllReduce) {
  const size_t count = 1001;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    if (!reduces()) continue;
    if (op == ReduceOp::kAvg && t() != DType::kF32 && t() != DType::kBF16) continue;
    same(std::string("all_reduce ") + std::string(reduce_op_name(op)), {input(t(), count, r())},
         [&](Communicator& c, std::vector<Bytes>& b, bool async) -> std::unique_ptr<Work> {
           if (async) return c.all_reduce_async(b[0].data(), count, t(), op);
           c.all_reduce(b[0].data(), count, t(), op);
           return nullptr;
         });
  }
}

TEST_P(Staged, AllGatherOutOfPlaceAndInPlace) {
  const size_t count = 37;
  same("all_gather", {input(t(), count, r()), Bytes(count * un() * es(), 0)},
       [&](Communicator& c, std::vector<Bytes>& b, bool async) -> std::unique_ptr<Work> {
         if (async) return c.all_gather_async(b[0].data(), b[1].data(), count, t());
         c.all_gather(b[0].data(), b[1].data(), count, t());
         return nullptr;
       });
  Bytes seeded(count * un() * es(), 0x11);
  const Bytes mine = input(t(), count, r());
  std::memcpy(seeded.data() + static_cast<size_t>(r()) * count * es(), mine.data(), mine.size());
  same("all_gather in place", {seeded}, [&](Communicator& c, std::vector<Bytes>& b, bool async) {
    unsigned char* own = b[0].data() + static_cast<size_t>(r()) * count * es();
    if (async) return c.all_gather_async(own, b[0].data(), count, t());
    c.all_gather(own, b[0].data(), count, t());
    return std::unique_ptr<Work>();
  });
}

TEST_P(Staged, AllGatherVWithAnEmptyBlock) {
  std::vector<size_t> counts(un());
  for (size_t q = 0; q < un(); ++q) counts[q] = q == 0 && n() > 1 ? 0 : q + 3;  // rank 0 sends nothing
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const size_t mine = counts[static_cast<size_t>(r())];
  same("all_gather_v", {input(t(), mine, r()), Bytes(total * es(), 0)},
       [&](Communicator& c, std::vector<Bytes>& b, bool async) {
         if (async) return c.all_gather_v_async(b[0].data(), mine, b[1].data(), counts, t());
         c.all_gather_v(b[0].data(), mine, b[1].data(), counts, t());
         return std::unique_ptr<Work>();
       });
}

TEST_P(Staged, ReduceScatter) {
  if (!reduces()) return;
  const size_t block = 53;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    same("reduce_scatter", {input(t(), block * un(), r()), Bytes(block * es(), 0)},
         [&](Communicator& c, std::vector<Bytes>& b, bool async) {
           if (async) return c.reduce_scatter_async(b[0].data(), b[1].data(), block, t(), op);
           c.reduce_scatter(b[0].data(), b[1].data(), block, t(), op);
           return std::unique_ptr<Work>();
         });
  }
}

TEST_P(Staged, BroadcastFromEveryRoot) {
  const size_t count = 19;
  for (int root = 0; root < n(); ++root) {
    same("broadcast from " + std::to_string(root), {input(t(), count, r(), root)},
         [&](Communicator& c, std::vector<Bytes>& b, bool async) {
           if (async) return c.broadcast_async(b[0].data(), count, t(), root);
           c.broadcast(b[0].data(), count, t(), root);
           return std::unique_ptr<Work>();
         });
  }
}

TEST_P(Staged, AllToAllAndAllToAllV) {
  const size_t block = 5;
  same("all_to_all", {input(t(), block * un(), r()), Bytes(block * un() * es(), 0)},
       [&](Communicator& c, std::vector<Bytes>& b, bool async) {
         if (async) return c.all_to_all_async(b[0].data(), b[1].data(), block, t());
         c.all_to_all(b[0].data(), b[1].data(), block, t());
         return std::unique_ptr<Work>();
       });
  // rank i sends j elements to rank j (nothing to rank 0); receives i from everyone
  std::vector<size_t> sc(un()), rc(un(), static_cast<size_t>(r()));
  std::iota(sc.begin(), sc.end(), size_t{0});
  const size_t send_total = std::accumulate(sc.begin(), sc.end(), size_t{0});
  const size_t recv_total = static_cast<size_t>(r()) * un();
  same("all_to_all_v", {input(t(), send_total, r()), Bytes(recv_total * es(), 0)},
       [&](Communicator& c, std::vector<Bytes>& b, bool async) {
         if (async) return c.all_to_all_v_async(b[0].data(), sc, b[1].data(), rc, t());
         c.all_to_all_v(b[0].data(), sc, b[1].data(), rc, t());
         return std::unique_ptr<Work>();
       });
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, Staged,
                         testing::Values(Case{DType::kF32, false}, Case{DType::kF32, true},
                                         Case{DType::kBF16, false}, Case{DType::kBF16, true},
                                         Case{DType::kI32, true}, Case{DType::kI64, true},
                                         Case{DType::kU16, true}),
                         case_name);

// Several collectives in flight at once, waited in reverse order: each must have its own staging
// buffer (a shared one would mix their data). Then, all waited, the buffers are reused.
TEST(StagedInFlight, SeveralCollectivesKeepTheirOwnStagingBuffers) {
  auto plain = world();
  auto copier = std::make_shared<DeferredCopier>();
  auto staged = staged_from(plain, copier);
  const int r = plain->rank(), n = plain->size();
  const size_t count = 300;
  const int k = 4;
  std::vector<Bytes> want, got;
  for (int j = 0; j < k; ++j) {
    want.push_back(input(DType::kF32, count, r, 100 * j));
    got.push_back(want.back());
    plain->all_reduce(want.back().data(), count, DType::kF32);
  }
  std::vector<std::unique_ptr<Work>> works;
  for (int j = 0; j < k; ++j) works.push_back(staged->all_reduce_async(got[static_cast<size_t>(j)].data(), count, DType::kF32));
  const int after_start = copier->allocations;
  for (int j = k - 1; j >= 0; --j) works[static_cast<size_t>(j)]->wait();
  for (int j = 0; j < k; ++j) EXPECT_TRUE(want[static_cast<size_t>(j)] == got[static_cast<size_t>(j)]) << "collective " << j;
  if (n > 1) {
    EXPECT_EQ(after_start, k) << "one staging buffer per collective in flight";
  }
  // All returned to the pool: the same number of collectives again allocates nothing.
  works.clear();
  for (int j = 0; j < k; ++j) works.push_back(staged->all_reduce_async(got[static_cast<size_t>(j)].data(), count, DType::kF32));
  for (auto& w : works) w->wait();
  EXPECT_EQ(copier->allocations, after_start) << "staging buffers are reused";
  // test() polls to completion, and makes the copy back itself.
  Bytes x = input(DType::kI32, 64, r), x_want = x;
  plain->all_reduce(x_want.data(), 64, DType::kI32);
  auto w = staged->all_reduce_async(x.data(), 64, DType::kI32);
  while (!w->test()) {
  }
  EXPECT_TRUE(x == x_want);
}

TEST(StagedInFlight, AWorkOutlivesItsCommunicatorAndAnUnwaitedWorkIsWaited) {
  auto plain = world();
  Bytes a = input(DType::kF32, 100, plain->rank()), a_want = a;
  plain->all_reduce(a_want.data(), 100, DType::kF32);
  std::unique_ptr<Work> w;
  {
    auto staged = staged_from(plain, std::make_shared<DeferredCopier>());
    w = staged->all_reduce_async(a.data(), 100, DType::kF32);
  }
  w->wait();
  EXPECT_TRUE(a == a_want);
  Bytes b = input(DType::kF32, 100, plain->rank(), 5), b_want = b;
  plain->all_reduce(b_want.data(), 100, DType::kF32);
  {
    auto staged = staged_from(plain, host_copier());
    auto dropped = staged->all_reduce_async(b.data(), 100, DType::kF32);
  }  // destroyed unwaited: waits and copies back
  EXPECT_TRUE(b == b_want);
}

TEST(StagedSplit, SplitAndDupAreStagedGroupsOfOneCopyOnTheDevice) {
  auto plain = world();
  auto copier = std::make_shared<DeferredCopier>();
  auto staged = staged_from(plain, copier);
  const int r = plain->rank(), n = plain->size();
  auto half = staged->split(r % 2, r, "half");
  auto twin = staged->dup("twin");
  auto alone = staged->split(r, 0, "alone");
  auto none = staged->split(-1, 0, "none");
  EXPECT_EQ(none, nullptr);
  ASSERT_NE(half, nullptr);  // every rank passed a colour: no rank returns here alone
  EXPECT_EQ(half->name(), "half");
  EXPECT_EQ(twin->size(), n);
  EXPECT_EQ(alone->size(), 1);
  std::vector<float> x(8, 1.0f);
  half->all_reduce(x.data(), 8, DType::kF32);
  twin->all_reduce(x.data(), 8, DType::kF32);
  const int h0 = (n + 1) / 2, h1 = n / 2;
  EXPECT_EQ(x[7], static_cast<float>(h0 * h0 + h1 * h1));
  twin->barrier();
  staged->barrier_async()->wait();
  // A group of one: the copy goes through the copier's device_copy (deferred until synchronize).
  std::vector<float> src{1, 2, 3}, dst(3, 0.0f);
  alone->all_gather(src.data(), dst.data(), 3, DType::kF32);
  copier->synchronize();
  EXPECT_EQ(dst, src);
}

TEST(StagedErrors, ArgumentsAreCheckedBeforeAnythingMoves) {
  auto staged = staged_from(world(), host_copier());
  std::vector<float> x(4);
  EXPECT_THROW(staged->all_reduce(nullptr, 4, DType::kF32), InvalidArgument);
  EXPECT_THROW(staged->all_reduce(x.data(), 4, DType::kI32, ReduceOp::kAvg), InvalidArgument);
  EXPECT_THROW(staged_from(nullptr, host_copier()), InvalidArgument);
  EXPECT_THROW(staged_from(world(), nullptr), InvalidArgument);
}

// All ranks of a ctest run share one node (one shared-memory domain).
TEST(LocalRank, OnOneNodeLocalIsWorld) {
  auto w = world();
  EXPECT_EQ(local_size(), w->size());
  EXPECT_EQ(local_rank(), w->rank());
  EXPECT_EQ(local_rank(), local_rank());  // cached, and still right
  // Every local rank is distinct: their sum is 0 + 1 + ... + (n - 1).
  int32_t sum = local_rank();
  w->all_reduce(&sum, 1, DType::kI32);
  EXPECT_EQ(sum, w->size() * (w->size() - 1) / 2);
}

}  // namespace
}  // namespace axonn::comm
