// kernels/cpu/gemm_engine_cpu.cpp — the GEMM tuner's engine on the CPU: kernels::sgemm (oneDNN or
// OpenBLAS, whichever is current) plus OpenMP transposes, timed by the wall clock.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "axonn/core/error.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"

namespace axonn::kernels {

namespace {

// Square tiles: a 32 x 32 fp32 tile of source and destination (8 KiB) stays in L1 while one is
// read along rows and the other written along rows.
constexpr int64_t kTile = 32;

class CpuGemmEngine final : public GemmEngine {
 public:
  std::string name() const override { return "cpu/" + std::string(gemm_backend_name(gemm_backend())); }

  void sgemm(const GemmCall& c) override {
    kernels::sgemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta, c.C, c.ldc);
  }

  void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
                 bool accumulate, float beta) override {
    // src [rows, cols] -> dst [cols, rows]
    const int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t tr = 0; tr < tiles_r; tr++) {
      for (int64_t tc = 0; tc < tiles_c; tc++) {
        const int64_t r0 = tr * kTile, r1 = std::min(rows, r0 + kTile);
        const int64_t c0 = tc * kTile, c1 = std::min(cols, c0 + kTile);
        for (int64_t c = c0; c < c1; c++) {
          float* d = dst + c * ld_dst;
          if (accumulate) {
            for (int64_t r = r0; r < r1; r++) d[r] = src[r * ld_src + c] + beta * d[r];
          } else {
            for (int64_t r = r0; r < r1; r++) d[r] = src[r * ld_src + c];
          }
        }
      }
    }
  }

  void copy(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src) override {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
      std::memcpy(dst + r * ld_dst, src + r * ld_src, sizeof(float) * static_cast<size_t>(cols));
  }

  float* workspace(int slot, size_t count) override {
    AXONN_CHECK(slot >= 0 && slot < kSlots, "GEMM workspace slot ", slot, " out of range");
    const auto s = static_cast<size_t>(slot);
    if (capacity_[s] < count) {
      buffers_[s].reset();  // free first: the old and new buffers need not coexist
      buffers_[s].reset(new float[count]);  // uninitialised: every use writes before it reads
      capacity_[s] = count;
    }
    return buffers_[s].get();
  }

  void release_workspace() override {
    for (size_t s = 0; s < buffers_.size(); s++) {
      buffers_[s].reset();
      capacity_[s] = 0;
    }
  }

  double time(const std::function<void()>& fn) override {
    Timer t;
    fn();
    return t.seconds();
  }

 private:
  static constexpr int kSlots = kWorkspaceTiming + 1;
  std::array<std::unique_ptr<float[]>, kSlots> buffers_;
  std::array<size_t, kSlots> capacity_{};
};

}  // namespace

GemmEngine& cpu_gemm_engine() {
  thread_local CpuGemmEngine engine;
  return engine;
}

void tuned_sgemm(std::string_view site, const GemmCall& c) {
  if (gemm_tuning()) {
    gemm_tuner().gemm(cpu_gemm_engine(), site, c);
  } else {
    sgemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta, c.C, c.ldc);
  }
}

}  // namespace axonn::kernels
