// Communicator::split/dup membership, argument errors (exceptions, never an abort or a hang), and
// MPI error codes turned into CommError, including errors rethrown by Work::wait().
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "comm/mpi/mpi_context.hpp"
#include "comm/mpi/mpi_error.hpp"

namespace axonn::comm {
namespace {

std::vector<int32_t> members(Communicator& c, int32_t world_rank) {
  std::vector<int32_t> all(static_cast<size_t>(c.size()));
  c.all_gather(&world_rank, all.data(), 1, DType::kI32);
  return all;
}

TEST(Split, ColorsAndReversedKeys) {
  auto w = world();
  const int n = w->size(), r = w->rank();
  auto sub = w->split(r % 3, n - r, "mod3");
  EXPECT_NE(sub, nullptr);
  if (!sub) return;  // no collective follows on this rank
  std::vector<int32_t> want;
  for (int q = n - 1; q >= 0; --q)
    if (q % 3 == r % 3) want.push_back(q);  // key n - q: highest world rank first
  EXPECT_EQ(members(*sub, r), want);
  EXPECT_EQ(sub->name(), "mod3");
  EXPECT_EQ(sub->size(), static_cast<int>(want.size()));
}

TEST(Split, NegativeColorJoinsNothing) {
  auto w = world();
  const int r = w->rank();
  auto sub = w->split(r == 0 ? -1 : 0, r, "rest");
  EXPECT_EQ(sub == nullptr, r == 0);
  if (sub) {
    EXPECT_EQ(sub->size(), w->size() - 1);
    EXPECT_EQ(sub->rank(), r - 1);
    int32_t one = 1;
    sub->all_reduce(&one, 1, DType::kI32);
    EXPECT_EQ(one, w->size() - 1);
  }
}

TEST(Split, DupHasTheSameMembers) {
  auto w = world();
  auto d = w->dup("twin");
  EXPECT_EQ(d->rank(), w->rank());
  EXPECT_EQ(d->size(), w->size());
  std::vector<int32_t> all(static_cast<size_t>(w->size()));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(members(*d, w->rank()), all);
}

// Every rank passes the same bad arguments, so every rank throws before sending anything, and the
// communicator is still usable afterwards.
TEST(Errors, BadArgumentsThrowInvalidArgumentOnEveryRank) {
  auto w = world();
  Communicator& c = *w;
  const auto n = static_cast<size_t>(c.size());
  std::vector<float> f(64 * n, 1.0f), g(64 * n, 0.0f);
  std::vector<int32_t> i32(64, 1);
  EXPECT_THROW(c.all_reduce(nullptr, 4, DType::kF32), InvalidArgument);
  EXPECT_THROW(c.all_reduce(i32.data(), 4, DType::kI32, ReduceOp::kAvg), InvalidArgument);
  EXPECT_THROW((void)c.all_reduce_async(i32.data(), 4, DType::kI64, ReduceOp::kAvg), InvalidArgument);
  EXPECT_THROW(c.all_reduce(f.data(), size_t{INT_MAX} + 1, DType::kF32), InvalidArgument);
  EXPECT_THROW(c.all_reduce(f.data(), 4, static_cast<DType>(42)), InvalidArgument);
  EXPECT_THROW(c.all_reduce(f.data(), 4, DType::kF32, static_cast<ReduceOp>(9)), InvalidArgument);
  EXPECT_THROW(c.broadcast(f.data(), 4, DType::kF32, c.size()), InvalidArgument);
  EXPECT_THROW(c.broadcast(f.data(), 4, DType::kF32, -1), InvalidArgument);
  std::vector<size_t> short_counts(n + 1, 1);
  EXPECT_THROW(c.all_gather_v(f.data(), 1, g.data(), short_counts, DType::kF32), InvalidArgument);
  std::vector<size_t> counts(n, 2);
  EXPECT_THROW(c.all_gather_v(f.data(), 3, g.data(), counts, DType::kF32), InvalidArgument);
  EXPECT_THROW(c.all_to_all_v(f.data(), short_counts, g.data(), counts, DType::kF32), InvalidArgument);
  EXPECT_THROW(c.reduce_scatter(f.data(), f.data() + 1, 8, DType::kF32), InvalidArgument);  // overlap
  if (n > 1) {
    EXPECT_THROW(c.all_gather(f.data() + 1, f.data(), 8, DType::kF32), InvalidArgument);  // overlap
  }
  // The message names the collective, the communicator and what to change.
  try {
    c.all_reduce(i32.data(), 4, DType::kI32, ReduceOp::kAvg);
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce on communicator 'world'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kAvg needs f32 or bf16"), std::string::npos) << e.what();
  }
  // Nothing half-started: the next collective works.
  int32_t one = 1;
  c.all_reduce(&one, 1, DType::kI32);
  EXPECT_EQ(one, c.size());
}

TEST(Errors, ZeroCountsAreNoOps) {
  auto w = world();
  w->all_reduce(nullptr, 0, DType::kF32);
  w->all_gather(nullptr, nullptr, 0, DType::kBF16);
  w->reduce_scatter(nullptr, nullptr, 0, DType::kI64);
  w->all_to_all(nullptr, nullptr, 0, DType::kI32);
  auto wk = w->broadcast_async(nullptr, 0, DType::kF32, 0);
  wk->wait();
  EXPECT_TRUE(wk->test());
}

TEST(Errors, MpiErrorCodeBecomesCommErrorWithMpiStringAndCallSite) {
  // A real MPI failure: MPI_Bcast with a root that does not exist, on a communicator with
  // MPI_ERRORS_RETURN (as all of ours are); checked by MPI locally, before any communication.
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int x = 0;
  bool threw = false;
  try {
    AXONN_MPI_CHECK(MPI_Bcast(&x, 1, MPI_INT, -7, comm), "broadcast test");
  } catch (const CommError& e) {
    threw = true;
    const std::string msg = e.what();
    EXPECT_NE(msg.find("MPI_Bcast failed (broadcast test): MPI_ERR_ROOT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_split_errors.cpp:"), std::string::npos) << msg;
  }
  EXPECT_TRUE(threw);
  MPI_Comm_free(&comm);
  EXPECT_NE(std::string(detail::mpi_error(MPI_ERR_COUNT, "MPI_Iallreduce(a, b)", "ctx").what())
                .find("MPI_Iallreduce failed (ctx): MPI_ERR_COUNT"),
            std::string::npos);
}

TEST(Errors, ErrorInAsyncWorkIsRethrownAtEveryWait) {
  for (bool thread : {true, false}) {
    auto ctx = std::make_shared<detail::MpiContext>(CommOptions{thread, 50});
    auto op = std::make_shared<detail::PendingOp>();
    op->what = "all_reduce of 8 f32 on communicator 'x'";
    op->complete(MPI_ERR_TRUNCATE);  // as the progress thread does for a failed request
    detail::MpiWork work(ctx, op);
    EXPECT_TRUE(work.test());
    EXPECT_THROW(work.wait(), CommError);
    try {
      work.wait();
      ADD_FAILURE() << "second wait did not throw";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_ERR_TRUNCATE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("communicator 'x'"), std::string::npos) << e.what();
    }
    // A failing completion step (e.g. kAvg's division) is rethrown the same way.
    auto op2 = std::make_shared<detail::PendingOp>();
    op2->on_complete = [] { throw CommError("completion step failed"); };
    op2->complete(MPI_SUCCESS);
    detail::MpiWork work2(ctx, op2);
    EXPECT_THROW(work2.wait(), CommError);
  }
}

}  // namespace
}  // namespace axonn::comm
