// Every collective of the MPI Communicator, blocking and non-blocking, for every dtype, against
// closed-form values (inputs depend on the rank, so the expected output is a formula in the rank
// and the group size). All values are small integers or halves: exact in bf16 as well as fp32.
//
// Multi-rank rule: no ASSERT_* before a collective (a rank that returns early would leave the others
// blocked); EXPECT_*, finish the schedule, then check.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"

namespace axonn::comm {
namespace {

// A buffer of any dtype, read and written through double (exact for the values used here).
class Buf {
 public:
  Buf(DType t, size_t n) : t_(t), n_(n), bytes_(n * dtype_size(t) + 1) {}
  void* data() { return bytes_.data(); }
  size_t size() const { return n_; }
  void set(size_t i, double v) {
    void* p = bytes_.data() + i * dtype_size(t_);
    switch (t_) {
      case DType::kF32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::kBF16: { uint16_t b = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &b, 2); break; }
      case DType::kI32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DType::kI64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::kU16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); break; }
    }
  }
  double get(size_t i) const {
    const void* p = bytes_.data() + i * dtype_size(t_);
    switch (t_) {
      case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
      case DType::kBF16: { uint16_t b; std::memcpy(&b, p, 2); return bf16_to_f32(b); }
      case DType::kI32: { int32_t x; std::memcpy(&x, p, 4); return x; }
      case DType::kI64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
      case DType::kU16: { uint16_t x; std::memcpy(&x, p, 2); return x; }
    }
    return 0;
  }
  void fill(double v) {
    for (size_t i = 0; i < n_; ++i) set(i, v);
  }

 private:
  DType t_;
  size_t n_;
  std::vector<unsigned char> bytes_;
};

// Counts the elements where got != want(i); records the first few mismatches.
template <typename F>
int wrong(const Buf& b, F want, const char* what) {
  int bad = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.get(i) != want(i)) {
      if (++bad <= 3) ADD_FAILURE() << what << "[" << i << "] = " << b.get(i) << ", want " << want(i);
    }
  }
  return bad;
}

// Runs one collective blocking, or async and waited.
template <typename Blocking, typename Async>
void run(bool async, Blocking blocking, Async start) {
  if (async) {
    auto w = start();
    w->wait();
    EXPECT_TRUE(w->test());
  } else {
    blocking();
  }
}

const size_t kCounts[] = {1, 13, 4099, 100003};

struct Case {
  DType dtype;
  bool async;
};
std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.dtype)) + (info.param.async ? "_async" : "_blocking");
}

class Collectives : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override { world_ = world(); }
  DType t() const { return GetParam().dtype; }
  bool async() const { return GetParam().async; }
  bool is_float() const { return t() == DType::kF32 || t() == DType::kBF16; }
  std::shared_ptr<Communicator> world_;
};

TEST_P(Collectives, AllReduce) {
  Communicator& c = *world_;
  const double n = c.size(), r = c.rank();
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax};
  if (is_float()) ops.push_back(ReduceOp::kAvg);
  for (ReduceOp op : ops) {
    for (size_t count : kCounts) {
      Buf b(t(), count);
      for (size_t i = 0; i < count; ++i) b.set(i, (r + 1) * double(i % 3 + 1));
      run(async(), [&] { c.all_reduce(b.data(), count, t(), op); },
          [&] { return c.all_reduce_async(b.data(), count, t(), op); });
      const double factor = op == ReduceOp::kSum ? n * (n + 1) / 2 : op == ReduceOp::kMax ? n : (n + 1) / 2;
      EXPECT_EQ(wrong(b, [&](size_t i) { return factor * double(i % 3 + 1); }, "all_reduce"), 0)
          << reduce_op_name(op) << " count " << count;
    }
  }
}

TEST_P(Collectives, AllGather) {
  Communicator& c = *world_;
  const size_t n = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
  for (size_t count : kCounts) {
    Buf send(t(), count), recv(t(), count * n);
    for (size_t i = 0; i < count; ++i) send.set(i, double(r * 16 + i % 16));
    run(async(), [&] { c.all_gather(send.data(), recv.data(), count, t()); },
        [&] { return c.all_gather_async(send.data(), recv.data(), count, t()); });
    EXPECT_EQ(wrong(recv, [&](size_t k) { return double((k / count) * 16 + (k % count) % 16); },
                    "all_gather"), 0) << "count " << count;
  }
  // In place: this rank's block already sits in recv.
  const size_t count = 1000;
  Buf recv(t(), count * n);
  recv.fill(-1);
  for (size_t i = 0; i < count; ++i) recv.set(r * count + i, double(r * 16 + i % 16));
  void* mine = static_cast<char*>(recv.data()) + r * count * dtype_size(t());
  run(async(), [&] { c.all_gather(mine, recv.data(), count, t()); },
      [&] { return c.all_gather_async(mine, recv.data(), count, t()); });
  EXPECT_EQ(wrong(recv, [&](size_t k) { return double((k / count) * 16 + (k % count) % 16); },
                  "all_gather in place"), 0);
}

TEST_P(Collectives, AllGatherVariableSizes) {
  Communicator& c = *world_;
  const size_t n = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
  for (size_t scale : {size_t{1}, size_t{1000}}) {
    // Counts 3,1,6,4,2,0,5,3 (times scale): one rank sends nothing at 6 ranks and up.
    std::vector<size_t> counts(n);
    for (size_t j = 0; j < n; ++j) counts[j] = (j * 5 + 3) % 7 * scale;
    std::vector<size_t> offset(n, 0);
    std::exclusive_scan(counts.begin(), counts.end(), offset.begin(), size_t{0});
    const size_t total = offset[n - 1] + counts[n - 1];
    Buf send(t(), counts[r]), recv(t(), total);
    for (size_t i = 0; i < counts[r]; ++i) send.set(i, double(r * 16 + i % 16));
    run(async(), [&] { c.all_gather_v(send.data(), counts[r], recv.data(), counts, t()); },
        [&] { return c.all_gather_v_async(send.data(), counts[r], recv.data(), counts, t()); });
    std::vector<double> want;
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < counts[j]; ++i) want.push_back(double(j * 16 + i % 16));
    EXPECT_EQ(wrong(recv, [&](size_t k) { return want[k]; }, "all_gather_v"), 0);
  }
}

TEST_P(Collectives, ReduceScatter) {
  Communicator& c = *world_;
  const double n = c.size(), r = c.rank();
  const size_t ranks = static_cast<size_t>(c.size());
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax};
  if (is_float()) ops.push_back(ReduceOp::kAvg);
  for (ReduceOp op : ops) {
    for (size_t count : kCounts) {
      Buf send(t(), count * ranks), recv(t(), count);
      for (size_t j = 0; j < ranks; ++j)
        for (size_t i = 0; i < count; ++i) send.set(j * count + i, (r + 1) * double((j + i) % 3 + 1));
      run(async(), [&] { c.reduce_scatter(send.data(), recv.data(), count, t(), op); },
          [&] { return c.reduce_scatter_async(send.data(), recv.data(), count, t(), op); });
      const double factor = op == ReduceOp::kSum ? n * (n + 1) / 2 : op == ReduceOp::kMax ? n : (n + 1) / 2;
      const size_t me = static_cast<size_t>(c.rank());
      EXPECT_EQ(wrong(recv, [&](size_t i) { return factor * double((me + i) % 3 + 1); },
                      "reduce_scatter"), 0) << reduce_op_name(op) << " count " << count;
    }
  }
}

TEST_P(Collectives, Broadcast) {
  Communicator& c = *world_;
  for (int root = 0; root < c.size(); ++root) {
    for (size_t count : {size_t{1}, size_t{4099}, size_t{100003}}) {
      Buf b(t(), count);
      if (c.rank() == root) {
        for (size_t i = 0; i < count; ++i) b.set(i, double(root * 16 + int(i % 16)));
      } else {
        b.fill(99);
      }
      run(async(), [&] { c.broadcast(b.data(), count, t(), root); },
          [&] { return c.broadcast_async(b.data(), count, t(), root); });
      EXPECT_EQ(wrong(b, [&](size_t i) { return double(root * 16 + int(i % 16)); }, "broadcast"), 0)
          << "root " << root;
    }
  }
}

TEST_P(Collectives, AllToAll) {
  Communicator& c = *world_;
  const size_t n = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
  for (size_t count : {size_t{1}, size_t{13}, size_t{4099}}) {
    Buf send(t(), count * n), recv(t(), count * n);
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < count; ++i) send.set(j * count + i, double(r * 16 + j * 2 + i % 2));
    run(async(), [&] { c.all_to_all(send.data(), recv.data(), count, t()); },
        [&] { return c.all_to_all_async(send.data(), recv.data(), count, t()); });
    // Block j of recv came from rank j, which had put it at its block r.
    EXPECT_EQ(wrong(recv, [&](size_t k) {
                return double((k / count) * 16 + r * 2 + (k % count) % 2);
              }, "all_to_all"), 0) << "count " << count;
  }
}

TEST_P(Collectives, AllToAllVariableSizes) {
  Communicator& c = *world_;
  const size_t n = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
  for (size_t scale : {size_t{1}, size_t{777}}) {
    // Rank a sends (a + 2b) % 3 * scale elements to rank b (zero for some pairs).
    auto amount = [&](size_t from, size_t to) { return (from + 2 * to) % 3 * scale; };
    std::vector<size_t> sc(n), rc(n);
    for (size_t j = 0; j < n; ++j) {
      sc[j] = amount(r, j);
      rc[j] = amount(j, r);
    }
    Buf send(t(), std::accumulate(sc.begin(), sc.end(), size_t{0}));
    Buf recv(t(), std::accumulate(rc.begin(), rc.end(), size_t{0}));
    size_t k = 0;
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < sc[j]; ++i) send.set(k++, double(r * 16 + j * 2 + i % 2));
    run(async(), [&] { c.all_to_all_v(send.data(), sc, recv.data(), rc, t()); },
        [&] { return c.all_to_all_v_async(send.data(), sc, recv.data(), rc, t()); });
    std::vector<double> want;
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < rc[j]; ++i) want.push_back(double(j * 16 + r * 2 + i % 2));
    EXPECT_EQ(wrong(recv, [&](size_t i) { return want[i]; }, "all_to_all_v"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, Collectives,
                         testing::Values(Case{DType::kF32, false}, Case{DType::kF32, true},
                                         Case{DType::kBF16, false}, Case{DType::kBF16, true},
                                         Case{DType::kI32, false}, Case{DType::kI32, true},
                                         Case{DType::kI64, false}, Case{DType::kI64, true}),
                         case_name);

TEST(Barrier, BlockingAndAsync) {
  auto c = world();
  c->barrier();
  auto w = c->barrier_async();
  w->wait();
  EXPECT_TRUE(w->test());
}

TEST(Bf16, InexactSumIsCloseAndIdenticalOnEveryRank) {
  // Values that bf16 cannot hold exactly: each combining step rounds once, so the result is within
  // a few bf16 ulps of the exact sum, and every rank must hold the same bits (replicas must not
  // drift apart).
  auto c = world();
  const size_t count = 4099, n = static_cast<size_t>(c->size());
  std::vector<uint16_t> v(count);
  std::vector<double> exact(count, 0.0);
  for (size_t i = 0; i < count; ++i) {
    for (size_t q = 0; q < n; ++q) exact[i] += bf16_to_f32(f32_to_bf16(0.1f * float(q + 1) * float(i % 7 + 1)));
    v[i] = f32_to_bf16(0.1f * float(c->rank() + 1) * float(i % 7 + 1));
  }
  c->all_reduce(v.data(), count, DType::kBF16);
  int far = 0;
  for (size_t i = 0; i < count; ++i)
    far += std::abs(bf16_to_f32(v[i]) - exact[i]) > double(n) * exact[i] / 256.0;
  EXPECT_EQ(far, 0);
  std::vector<uint16_t> all(count * n);
  c->all_gather(v.data(), all.data(), count, DType::kU16);
  int differ = 0;
  for (size_t q = 0; q < n; ++q) differ += std::memcmp(&all[q * count], v.data(), count * 2) != 0;
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace axonn::comm
