// comm/mpi/mpi_communicator.hpp — the MPI backend of Communicator (private).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "axonn/comm/communicator.hpp"
#include "mpi_context.hpp"

namespace axonn::comm::detail {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed by the destructor) and sets MPI_ERRORS_RETURN on it.
  MpiCommunicator(std::shared_ptr<MpiContext> ctx, MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;
  std::unique_ptr<Communicator> dup(std::string name) override;

 protected:
  std::unique_ptr<Work> do_all_reduce(void* buf, size_t count, DType dtype, ReduceOp op,
                                      bool async) override;
  std::unique_ptr<Work> do_all_gather(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override;
  std::unique_ptr<Work> do_all_gather_v(const void* send, void* recv,
                                        std::span<const size_t> recv_counts, DType dtype,
                                        bool async) override;
  std::unique_ptr<Work> do_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                          DType dtype, ReduceOp op, bool async) override;
  std::unique_ptr<Work> do_broadcast(void* buf, size_t count, DType dtype, int root,
                                     bool async) override;
  std::unique_ptr<Work> do_all_to_all(const void* send, void* recv, size_t count, DType dtype,
                                      bool async) override;
  std::unique_ptr<Work> do_all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                        void* recv, std::span<const size_t> recv_counts,
                                        DType dtype, bool async) override;
  std::unique_ptr<Work> do_barrier(bool async) override;

 private:
  // "all_reduce of 1024 f32 on communicator 'x'"
  std::string describe(const char* collective, size_t count, DType dtype) const;
  // The watchdog's record of this communicator's next collective (counts it).
  WaitInfo next_call(const char* collective, size_t count, DType dtype);
  WaitInfo next_call(const char* collective);  // barrier, split, dup: no count
  std::shared_ptr<PendingOp> pending(std::string what) const;
  // Hands a started op to the progress thread (if any) and wraps it in a Work.
  std::unique_ptr<Work> started(std::shared_ptr<PendingOp> op);

  std::shared_ptr<MpiContext> ctx_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  uint64_t calls_ = 0;  // collectives issued (the watchdog names the n-th)
};

}  // namespace axonn::comm::detail
