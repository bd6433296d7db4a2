// kernels/cuda/gemm_engine_cuda.cpp — the GEMM tuner's engine on the GPU: cublasSgemm, the transpose
// kernel and cudaMemcpy2DAsync on the backend's stream, device workspaces, timing by CUDA events.
#include <array>
#include <memory>
#include <vector>

#include "core/cuda/device_buffer.hpp"
#include "gemm_tuning.hpp"
#include "runtime.hpp"

namespace axonn::kernels {

namespace {

class CudaGemmEngine final : public GemmEngine {
 public:
  CudaGemmEngine() = default;
  CudaGemmEngine(const CudaGemmEngine&) = delete;
  CudaGemmEngine& operator=(const CudaGemmEngine&) = delete;
  ~CudaGemmEngine() override {
    // at thread or process exit the context may be gone already: nothing to report then
    if (start_) (void)cudaEventDestroy(start_);
    if (stop_) (void)cudaEventDestroy(stop_);
  }

  std::string name() const override { return "cuda"; }

  void sgemm(const GemmCall& call) override { cuda::detail::sgemm_rowmajor(call); }

  void transpose(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src,
                 bool accumulate, float beta) override {
    cuda::detail::transpose(dst, ld_dst, src, rows, cols, ld_src, accumulate, beta);
  }

  void copy(float* dst, int64_t ld_dst, const float* src, int64_t rows, int64_t cols, int64_t ld_src) override {
    if (rows == 0 || cols == 0) return;
    AXONN_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(ld_dst) * sizeof(float), src,
                                       static_cast<size_t>(ld_src) * sizeof(float),
                                       static_cast<size_t>(cols) * sizeof(float), static_cast<size_t>(rows),
                                       cudaMemcpyDeviceToDevice, cuda::detail::stream()));
  }

  float* workspace(int slot, size_t count) override {
    AXONN_CHECK(slot >= 0 && slot < kSlots, "GEMM workspace slot ", slot, " out of range");
    auto& b = buffers_[static_cast<size_t>(slot)];
    // reserve() frees before it allocates; cudaFree waits for the device, so no queued kernel
    // still reads the old buffer
    b.reserve(count * sizeof(float));
    return b.as<float>();
  }

  void release_workspace() override {
    for (auto& b : buffers_) b = cuda_detail::DeviceBuffer();
  }

  double time(const std::function<void()>& fn) override {
    if (!start_) {
      AXONN_CUDA_CHECK(cudaEventCreate(&start_));
      AXONN_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    AXONN_CUDA_CHECK(cudaEventRecord(start_, cuda::detail::stream()));
    fn();
    AXONN_CUDA_CHECK(cudaEventRecord(stop_, cuda::detail::stream()));
    AXONN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    AXONN_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  static constexpr int kSlots = kWorkspaceTiming + 1;
  std::array<cuda_detail::DeviceBuffer, kSlots> buffers_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

GemmEngine& cuda_gemm_engine() {
  // one engine per thread and device: its workspaces and events live on that device
  thread_local std::vector<std::unique_ptr<CudaGemmEngine>> engines;
  int device = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  if (engines.size() <= static_cast<size_t>(device)) engines.resize(static_cast<size_t>(device) + 1);
  auto& e = engines[static_cast<size_t>(device)];
  if (!e) e = std::make_unique<CudaGemmEngine>();
  return *e;
}

namespace cuda::detail {

void sgemm_rowmajor(const GemmCall& c) {
  if (c.M == 0 || c.N == 0) return;
  AXONN_CHECK(c.K > 0, "cuda sgemm: K = 0 reaches cuBLAS (leading dimensions of 0 are refused); the caller "
                       "handles an empty sum");
  const int m = to_blas_int(c.M, "GEMM rows M"), n = to_blas_int(c.N, "GEMM columns N"),
            k = to_blas_int(c.K, "GEMM depth K");
  const int lda = to_blas_int(c.lda, "lda"), ldb = to_blas_int(c.ldb, "ldb"), ldc = to_blas_int(c.ldc, "ldc");
  AXONN_CUBLAS_CHECK(cublasSgemm(cublas(), c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 n, m, k, &c.alpha, c.B, ldb, c.A, lda, &c.beta, c.C, ldc));
}

void tuned_sgemm(std::string_view site, const GemmCall& call) {
  if (gemm_tuning()) {
    gemm_tuner().gemm(cuda_gemm_engine(), site, call);
  } else {
    sgemm_rowmajor(call);
  }
}

}  // namespace cuda::detail

}  // namespace axonn::kernels
