// CudaBackend::Project: the merged projection as one cuBLASLt matmul.
//
// cuBLASLt is column-major; a row-major [T, N] output is the column-major
// [N, T] matrix out^T = op(W) x hidden^T, so: A = weight (op T for the
// [N, K] "out_in" layout, N for [K, N]), B = hidden ([K, T] column-major),
// D = out ([N, T] column-major, ld N). BF16 A/B, FP32 compute and scale.
#include <cublasLt.h>

#include <memory>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_status.h"

namespace swa::cuda {

// The handle and the one workspace every projection of the backend uses
// outside stream capture. Projections on different streams would share the
// workspace concurrently, so each one waits for the previous one (an event)
// when the stream changes. A captured projection uses no workspace: its
// replays run whenever the application launches the graph, unordered with
// later projections (an event recorded in a capture is not recorded again at
// replay), so no buffer it writes may be shared.
class CublasLtContext {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  cudaEvent_t done = nullptr;     // recorded after the last projection
  cudaStream_t last_stream = nullptr;
  bool used = false;
  ~CublasLtContext() {
    if (done != nullptr) {
      cudaEventSynchronize(done);
      cudaEventDestroy(done);
    }
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

void DestroyBlas(CublasLtContext* blas) { delete blas; }

namespace {

absl::Status BlasStatus(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s failed: cuBLASLt status %d", what, static_cast<int>(s));
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
    return absl::UnimplementedError(msg);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (s == CUBLAS_STATUS_INVALID_VALUE) return absl::InvalidArgumentError(msg);
  return absl::InternalError(msg);
}

#define SWA_BLAS_RETURN_IF_ERROR(expr, what) SWA_RETURN_IF_ERROR(BlasStatus((expr), (what)))

// Owns the descriptors of one call.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// The largest power of two (up to 256) that divides the address: what the
// matmul may assume of the pointer (16-byte-aligned views must work).
uint32_t AlignmentOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

absl::Status SetAlignment(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                          const void* p, const char* what) {
  const uint32_t align = AlignmentOf(p);
  return BlasStatus(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align), what);
}

}  // namespace

// At set-up, so that a projection allocates nothing (and can be captured).
absl::Status CreateBlas(CublasLtContext** out) {
  auto ctx = std::make_unique<CublasLtContext>();
  SWA_BLAS_RETURN_IF_ERROR(cublasLtCreate(&ctx->handle), "cublasLtCreate");
  SWA_CUDA_RETURN_IF_ERROR(cudaMalloc(&ctx->workspace, CublasLtContext::kWorkspaceBytes),
                           "cudaMalloc of the cuBLASLt workspace");
  SWA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming),
                           "cudaEventCreate");
  *out = ctx.release();
  return absl::OkStatus();
}

absl::Status CudaBackend::Project(const ProjectWork& w) {
  absl::MutexLock lock(&mu_);
  DeviceGuard guard(device_);
  SWA_RETURN_IF_ERROR(guard.status());
  if (w.tokens == 0) return absl::OkStatus();
  if (blas_ == nullptr) return absl::InternalError("the cuBLASLt context was not created");
  cudaStream_t stream = static_cast<cudaStream_t>(w.stream);
  const uint64_t n = static_cast<uint64_t>(w.out_dim);
  const uint64_t k = static_cast<uint64_t>(w.in_dim);
  const uint64_t t = static_cast<uint64_t>(w.tokens);
  const bool out_in = w.layout == WeightLayout::kOutIn;
  const cudaDataType_t d_type = w.out_dtype == Dtype::kBf16 ? CUDA_R_16BF : CUDA_R_32F;

  Descs ds;
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                           "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = out_in ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = CUBLAS_OP_N;
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &op_a, sizeof op_a),
                           "setting TRANSA");
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                          &op_b, sizeof op_b),
                           "setting TRANSB");
  // A as stored: out_in = column-major [K, N] (ld K); in_out = [N, K] (ld N).
  SWA_BLAS_RETURN_IF_ERROR(out_in ? cublasLtMatrixLayoutCreate(&ds.a, CUDA_R_16BF, k, n, k)
                                  : cublasLtMatrixLayoutCreate(&ds.a, CUDA_R_16BF, n, k, n),
                           "cublasLtMatrixLayoutCreate(A)");
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&ds.b, CUDA_R_16BF, k, t, k),
                           "cublasLtMatrixLayoutCreate(B)");
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&ds.d, d_type, n, t, n),
                           "cublasLtMatrixLayoutCreate(D)");
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&ds.pref),
                           "cublasLtMatmulPreferenceCreate");
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SWA_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture),
                           "cudaStreamIsCapturing on the projection's stream");
  const bool captured = capture != cudaStreamCaptureStatusNone;
  // Captured: algorithms that need no workspace (CublasLtContext).
  const size_t ws = captured ? 0 : CublasLtContext::kWorkspaceBytes;
  SWA_BLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &ws, sizeof ws),
      "setting the workspace size");
  SWA_RETURN_IF_ERROR(SetAlignment(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, w.weight,
                                   "setting A's alignment"));
  SWA_RETURN_IF_ERROR(SetAlignment(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, w.hidden,
                                   "setting B's alignment"));
  SWA_RETURN_IF_ERROR(SetAlignment(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, w.out,
                                   "setting C's alignment"));
  SWA_RETURN_IF_ERROR(SetAlignment(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, w.out,
                                   "setting D's alignment"));
  cublasLtMatmulHeuristicResult_t heur = {};
  int found = 0;
  SWA_BLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(blas_->handle, ds.op, ds.a, ds.b, ds.d,
                                                          ds.d, ds.pref, 1, &heur, &found),
                           "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    return absl::UnimplementedError(absl::StrFormat(
        "cuBLASLt has no algorithm for T = %d, K = %d, N = %d%s", w.tokens, w.in_dim, w.out_dim,
        captured ? " without a workspace (the stream is being captured)" : ""));
  const float alpha = 1.0f, beta = 0.0f;
  if (captured) {
    // Nothing shared, so no ordering (waiting on the uncaptured event here
    // would also be an illegal cross-capture dependency).
    return BlasStatus(cublasLtMatmul(blas_->handle, ds.op, &alpha, w.weight, ds.a, w.hidden, ds.b,
                                     &beta, w.out, ds.d, w.out, ds.d, &heur.algo, nullptr, 0,
                                     stream),
                      "cublasLtMatmul (captured, no workspace)");
  }
  // The workspace is shared: a projection on another stream waits for the last one.
  if (blas_->used && blas_->last_stream != stream)
    SWA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, blas_->done, 0),
                             "ordering after the previous projection");
  SWA_BLAS_RETURN_IF_ERROR(
      cublasLtMatmul(blas_->handle, ds.op, &alpha, w.weight, ds.a, w.hidden, ds.b, &beta, w.out,
                     ds.d, w.out, ds.d, &heur.algo, blas_->workspace, ws, stream),
      "cublasLtMatmul");  // reports its own launch failures
  SWA_CUDA_RETURN_IF_ERROR(cudaEventRecord(blas_->done, stream), "cudaEventRecord");
  blas_->last_stream = stream;
  blas_->used = true;
  return absl::OkStatus();
}

}  // namespace swa::cuda
