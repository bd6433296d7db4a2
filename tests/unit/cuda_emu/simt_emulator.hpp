// tests/unit/cuda_emu/simt_emulator.hpp — runs CUDA kernel source on the CPU, for tests: every thread of a block
// is a fiber (ucontext) on the calling thread, blocks one after another. Where a kernel synchronises
// (__syncthreads) or a warp exchanges registers (shuffles, the tensor-core mma.sync and ldmatrix of
// kernels/cuda/warp_mma.cuh), the fiber yields until the block or the warp has arrived; the last arrival
// computes the exchange for all 32 lanes from the values they deposited. The scheduler resumes threads in a
// chosen order (Schedule), so that a warp may run ahead of the others as far as the barriers let it, and
// cp.async copies land at issue or at their wait (CopyTiming). So a kernel's logic (its indexing, masking,
// fragment layouts, reductions, barriers and copy waits) runs on a machine without a GPU, in CI, before any
// GPU session.
//
// What it is not: a timing model, or proof of what the hardware does where the PTX ISA is the only source.
// The fragment layouts of the emulated mma.m16n8k16 and ldmatrix (warp_mma.cuh) are the PTX ISA's (sections
// "Matrix Fragments for mma.m16n8k16" and "ldmatrix"); a kernel and its emulation could share a misreading of
// them, which only a GPU run shows (the GPU tests compare the same kernels with the oracle on the device).
//
// Use: define AXONN_SIMT_EMULATOR, include this file, then the kernel's .cuh (which includes nothing of CUDA
// in that mode); launch with axonn::emu::launch(grid, block, shared_bytes, [&] { kernel(args...); }).
// Dynamic shared memory: the kernel's AXONN_DYNAMIC_SHARED(name) names emu::dynamic_shared(). A static
// __shared__ array is a function-local static: one per kernel instantiation, seen by every thread of the
// running block (blocks run one after another, so they may share it; like the GPU's, it starts with whatever
// the previous block left). atomicAdd is a plain addition: fibers switch only at barriers and warp exchanges.
// A 16-byte access must be 16-byte aligned (AXONN_EXPECT_ALIGNED16 in the kernels, cp.async, ldmatrix rows):
// a misaligned one fails the launch, as it faults on the GPU.
#pragma once

#ifndef AXONN_SIMT_EMULATOR
#error "define AXONN_SIMT_EMULATOR before including simt_emulator.hpp"
#endif

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "axonn/core/dtype.hpp"  // f32_to_bf16: the host's rounding, as __float2bfloat16_rn

// Under AddressSanitizer every switch between stacks is announced (the fiber API of
// sanitizer/common_interface_defs.h), so that ASan checks the kernels' accesses to host memory (a read past a
// buffer's end is a fault on the GPU too) and does not mistake a fiber's stack for a corrupted one.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AXONN_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(AXONN_EMU_ASAN)
#define AXONN_EMU_ASAN 1
#endif
#if defined(AXONN_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

// ---- the CUDA vocabulary a kernel file uses, as host C++ ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static

struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
// cuda_bf16.h's conversions that the kernels use: round to nearest even, and the bits.
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {axonn::f32_to_bf16(f)}; }
inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
template <typename T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

namespace axonn::emu {

constexpr int kWarpSize = 32;

// The stack switches, told to ASan where it runs (no-ops otherwise): before a switch, the stack switched to;
// after it, on the new stack, completing it (and learning the stack left, where asked).
inline void announce_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if defined(AXONN_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}
inline void complete_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#if defined(AXONN_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

constexpr size_t kStackBytes = 32 * 1024;

// The fibers' stacks, kept from launch to launch (allocated once per thread of the largest block): a launch
// then costs no allocation, which matters under ASan, whose large allocations are each an mmap. Not zeroed:
// only the pages a fiber uses are touched.
inline char* fiber_stack(size_t thread) {
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() <= thread) stacks.emplace_back(new char[kStackBytes]);
  return stacks[thread].get();
}

// One thread of the running block.
// An asynchronous copy to shared memory (cp.async) not yet landed: 16 bytes, or zeros.
struct PendingCopy {
  void* dst;
  const void* src;
  bool zero_fill;
};

struct Fiber {
  dim3 idx;
  std::vector<PendingCopy> open_group;               // cp.async issued since the last commit
  std::vector<std::vector<PendingCopy>> committed;   // committed groups, oldest first
  ucontext_t ctx{};
  char* stack = nullptr;  // kStackBytes of fiber_stacks()
  bool done = false;
  const unsigned* wait_on = nullptr;  // waiting until *wait_on != wait_value (a barrier's or warp's generation)
  unsigned wait_value = 0;
  bool runnable() const { return !done && (wait_on == nullptr || *wait_on != wait_value); }
};

// Which runnable thread the scheduler resumes next. On a GPU warps run in any order relative to each other,
// so a kernel must be right under every order; the tests run each kernel under the two extremes:
// kLowestFirst lets warp 0 run as far as it can before warp 1 starts (then warp 1, ...), kHighestFirst the
// last warp first. A missing __syncthreads shows as wrong results under one of them.
enum class Schedule { kLowestFirst, kHighestFirst };

// When an asynchronous copy to shared memory (cp.async) lands: the hardware may land it at once or only when
// its thread waits for it, so a kernel must be right under both. kAtWait shows a tile read before its wait (the
// old contents), kAtIssue a tile overwritten while other warps still read it (a missing barrier before the
// refill).
enum class CopyTiming { kAtWait, kAtIssue };

// An exchange among the 32 lanes of a warp: each deposits a pointer to its input and to its output.
struct WarpExchange {
  int arrived = 0;
  unsigned generation = 0;
  const void* in[kWarpSize] = {};
  void* out[kWarpSize] = {};
};

struct Block {
  dim3 grid, block, block_idx;
  std::vector<Fiber> fibers;
  std::vector<WarpExchange> warps;
  std::vector<unsigned char> shared;
  int current = -1;
  int barrier_arrived = 0;
  unsigned barrier_generation = 0;
  std::function<void()> kernel;
  CopyTiming copies = CopyTiming::kAtWait;
  ucontext_t scheduler{};
  const void* scheduler_stack = nullptr;  // the scheduler's stack, for ASan's switch announcements
  size_t scheduler_stack_size = 0;
  std::exception_ptr fault;  // what a thread threw (a misaligned access): the launch rethrows it
};

inline Block*& running() {
  static Block* b = nullptr;
  return b;
}
inline Block& block() {
  if (running() == nullptr) throw std::logic_error("simt emulator: a device function ran outside emu::launch");
  return *running();
}
inline Fiber& self() { return block().fibers[static_cast<size_t>(block().current)]; }
inline int thread_rank() {
  const Block& b = block();
  const Fiber& f = b.fibers[static_cast<size_t>(b.current)];
  return static_cast<int>(f.idx.x + b.block.x * (f.idx.y + b.block.y * f.idx.z));
}
inline int lane_id() { return thread_rank() % kWarpSize; }

// Back to the scheduler until *generation != value.
inline void wait_while_equal(const unsigned* generation, unsigned value) {
  Block& b = block();
  Fiber& f = b.fibers[static_cast<size_t>(b.current)];
  f.wait_on = generation;
  f.wait_value = value;
  void* fake_stack = nullptr;
  announce_switch(&fake_stack, b.scheduler_stack, b.scheduler_stack_size);
  swapcontext(&f.ctx, &b.scheduler);
  complete_switch(fake_stack, nullptr, nullptr);
  f.wait_on = nullptr;
}

// __syncthreads: every thread of the block must arrive (as on the GPU; a thread that left early deadlocks,
// which the scheduler reports).
inline void syncthreads() {
  Block& b = block();
  const unsigned gen = b.barrier_generation;
  if (++b.barrier_arrived == static_cast<int>(b.fibers.size())) {
    b.barrier_arrived = 0;
    b.barrier_generation++;
    return;
  }
  wait_while_equal(&b.barrier_generation, gen);
}

// A warp-wide exchange: every lane of the warp calls it with its own in/out; the last to arrive runs
// compute(in[32], out[32]) for all of them. The warp must be whole (blockDim a multiple of 32 here).
template <typename In, typename Out, typename F>
void warp_exchange(const In& in, Out& out, F compute) {
  Block& b = block();
  const int rank = thread_rank();
  WarpExchange& w = b.warps[static_cast<size_t>(rank / kWarpSize)];
  const unsigned gen = w.generation;
  w.in[rank % kWarpSize] = &in;
  w.out[rank % kWarpSize] = &out;
  if (++w.arrived == kWarpSize) {
    const In* ins[kWarpSize];
    Out* outs[kWarpSize];
    for (int l = 0; l < kWarpSize; l++) {
      ins[l] = static_cast<const In*>(w.in[l]);
      outs[l] = static_cast<Out*>(w.out[l]);
    }
    compute(ins, outs);
    w.arrived = 0;
    w.generation++;
    return;
  }
  wait_while_equal(&w.generation, gen);
}

inline unsigned char* dynamic_shared() { return block().shared.data(); }

// A 16-byte access (a uint4/float4 load or store, cp.async, an ldmatrix row) must be 16-byte aligned: the GPU
// faults ("misaligned address") where the host's loads would quietly work, so the emulator faults too.
inline void expect_aligned16(const void* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    throw std::runtime_error(std::string("simt emulator: misaligned 16-byte ") + what + " (the GPU faults)");
}

// cp.async at one of the two extremes the hardware allows (CopyTiming): landed at issue, or only when its thread
// waits for its group (cp.async.wait_group).
inline void land(const PendingCopy& c) {
  if (c.zero_fill)
    std::memset(c.dst, 0, 16);
  else
    std::memcpy(c.dst, c.src, 16);
}
inline void cp_async16(void* dst, const void* src, bool zero_fill) {
  expect_aligned16(dst, "cp.async destination");
  if (!zero_fill) expect_aligned16(src, "cp.async source");
  if (block().copies == CopyTiming::kAtIssue)
    land({dst, src, zero_fill});
  else
    self().open_group.push_back({dst, src, zero_fill});
}
inline void cp_async_commit() {
  Fiber& f = self();
  f.committed.push_back(std::move(f.open_group));
  f.open_group.clear();
}
inline void cp_async_wait(int most_pending) {
  Fiber& f = self();
  while (static_cast<int>(f.committed.size()) > most_pending) {
    for (const PendingCopy& c : f.committed.front()) land(c);
    f.committed.erase(f.committed.begin());
  }
}

inline void fiber_entry() {
  Block& b = block();
  complete_switch(nullptr, &b.scheduler_stack, &b.scheduler_stack_size);
  try {
    b.kernel();
  } catch (...) {  // caught on the fiber's own stack; the scheduler abandons the block and rethrows it
    b.fault = std::current_exception();
  }
  b.fibers[static_cast<size_t>(b.current)].done = true;
  announce_switch(nullptr, b.scheduler_stack, b.scheduler_stack_size);  // this stack ends here
  // returning resumes uc_link: the scheduler
}

// A fiber that starts at fiber_entry on its own stack and returns to `scheduler`. (Out of line: getcontext
// "returns twice" for the compiler, which would otherwise distrust the caller's locals.)
[[gnu::noinline]] inline void prepare_fiber(Fiber& f, size_t stack_bytes, ucontext_t* scheduler) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = stack_bytes;
  f.ctx.uc_link = scheduler;
  makecontext(&f.ctx, fiber_entry, 0);
}

// Runs kernel() as every thread of every block of `grid` (blocks in order x, then y, then z), with
// `shared_bytes` of dynamic shared memory per block (filled with a pattern, not zeros: a kernel must not
// read shared memory it did not write), resuming threads in the order `schedule` says, landing asynchronous
// copies as `copies` says. Throws on a deadlock
// (threads waiting for others that have ended or wait themselves).
inline void launch(dim3 grid, dim3 blockdim, size_t shared_bytes, std::function<void()> kernel,
                   Schedule schedule = Schedule::kLowestFirst, CopyTiming copies = CopyTiming::kAtWait) {
  const unsigned threads = blockdim.x * blockdim.y * blockdim.z;
  if (threads == 0 || threads % kWarpSize != 0 || threads > 1024)
    throw std::invalid_argument("simt emulator: a block of " + std::to_string(threads) +
                                " threads (a multiple of 32 up to 1024 here)");
  Block b;
  b.grid = grid;
  b.block = blockdim;
  b.kernel = std::move(kernel);
  b.copies = copies;
  b.fibers.resize(threads);
  for (unsigned t = 0; t < threads; t++) b.fibers[t].stack = fiber_stack(t);
  b.warps.resize(threads / kWarpSize);
  running() = &b;
  struct Reset {
    ~Reset() { running() = nullptr; }
  } reset;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        b.block_idx = dim3(x, y, z);
        b.shared.assign(shared_bytes, 0xA5);
        b.barrier_arrived = 0;
        for (auto& w : b.warps) w = WarpExchange{};
        for (unsigned t = 0; t < threads; t++) {
          Fiber& f = b.fibers[t];
          f.idx = dim3(t % blockdim.x, (t / blockdim.x) % blockdim.y, t / (blockdim.x * blockdim.y));
          f.done = false;
          f.wait_on = nullptr;
          f.open_group.clear();
          f.committed.clear();
          prepare_fiber(f, kStackBytes, &b.scheduler);
        }
        for (;;) {
          int next = -1;
          for (unsigned i = 0; i < threads && next < 0; i++) {
            const unsigned t = schedule == Schedule::kLowestFirst ? i : threads - 1 - i;
            if (b.fibers[t].runnable()) next = static_cast<int>(t);
          }
          if (next < 0) break;
          b.current = next;
          void* fake_stack = nullptr;
          announce_switch(&fake_stack, b.fibers[static_cast<size_t>(next)].stack, kStackBytes);
          swapcontext(&b.scheduler, &b.fibers[static_cast<size_t>(next)].ctx);
          complete_switch(fake_stack, nullptr, nullptr);
          b.current = -1;
          if (b.fault) std::rethrow_exception(b.fault);  // the other threads' stacks are dropped as they are
        }
        for (const auto& f : b.fibers)
          if (!f.done)
            throw std::runtime_error("simt emulator: deadlock in block (" + std::to_string(x) + "," +
                                     std::to_string(y) + "," + std::to_string(z) +
                                     "): threads wait at a barrier or warp exchange that others never reach");
      }
}

}  // namespace axonn::emu

#define threadIdx (::axonn::emu::self().idx)
#define blockIdx (::axonn::emu::block().block_idx)
#define blockDim (::axonn::emu::block().block)
#define gridDim (::axonn::emu::block().grid)

inline void __syncthreads() { axonn::emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  int in = 0, out = 0;
  axonn::emu::warp_exchange(in, out, [](const int* const*, int* const*) {});
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  T out{};
  axonn::emu::warp_exchange(v, out, [lane_mask](const T* const* in, T* const* o) {
    for (int l = 0; l < axonn::emu::kWarpSize; l++) *o[l] = *in[l ^ lane_mask];
  });
  return out;
}
