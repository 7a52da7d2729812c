// The CPU backend: host memory from anonymous mappings, the CPU step and
// projection on one thread pool per cache.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_step.h"
#include "backend/cpu/decode_graph_cpu.h"
#include "backend/cpu/gemm_cpu.h"
#include "backend/cpu/compress_cpu.h"
#include "backend/cpu/merge_cpu.h"
#include "backend/cpu/thread_pool.h"

namespace swa::cpu {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(unsigned num_threads) : pool_(num_threads) {}

  BackendKind kind() const override { return BackendKind::kCpu; }
  int device() const override { return -1; }
  bool HostAddressable() const override { return true; }

  absl::Status Supports(const LayerSpec& layer) const override {
    if (!HeadDimSupported(static_cast<int>(layer.head_dim)))
      return absl::UnimplementedError(absl::StrFormat(
          "head_dim = %u is not supported by the CPU step kernels (a multiple of 32 in [32, %d])",
          layer.head_dim, kMaxHeadDim));
    return absl::OkStatus();
  }

  // Anonymous mappings are page aligned, zero filled and committed lazily, so
  // a large pool costs memory only for the slots that are used.
  absl::StatusOr<void*> Allocate(size_t bytes, size_t alignment) override {
    if (alignment > 4096)
      return absl::InvalidArgumentError(absl::StrFormat("alignment %u exceeds 4096", alignment));
    if (bytes == 0) bytes = 1;
    // The mapping is lazy (overcommit would accept almost anything and fail
    // later, at first touch): refuse a pool larger than the machine's memory.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / uint64_t(page) > uint64_t(pages))
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the pool needs %u bytes (max_slots * slot_bytes), more than this machine's %u bytes "
          "of memory",
          bytes, uint64_t(pages) * uint64_t(page)));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return absl::ResourceExhaustedError(
          absl::StrFormat("cannot map %u bytes of host memory: %s", bytes, std::strerror(errno)));
    return p;
  }
  void Free(void* ptr, size_t bytes) override {
    if (ptr != nullptr) munmap(ptr, bytes == 0 ? 1 : bytes);
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status CopyFromHost(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status Memset(void* dst, int value, size_t bytes) override {
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }

  absl::Status Prepare(const PlanView& plan, std::unique_ptr<PreparedPlan>* prepared) override {
    auto* cpu = dynamic_cast<CpuPreparedPlan*>(prepared->get());
    if (cpu == nullptr) {
      auto fresh = std::make_unique<CpuPreparedPlan>();
      cpu = fresh.get();
      *prepared = std::move(fresh);
    }
    PrepareCpuPlan(plan, cpu);
    return absl::OkStatus();
  }

  absl::Status RunStep(const StepWork& work, PreparedPlan& prepared,
                       StepResult* result) override {
    const auto* cpu = dynamic_cast<const CpuPreparedPlan*>(&prepared);
    if (cpu == nullptr || cpu->stamp != work.plan.stamp)
      return absl::InternalError("the CPU step was handed a plan prepared for another build");
    absl::MutexLock lock(&step_mu_);  // the scratch serves one step at a time
    return RunCpuStep(work, *cpu, &pool_, scratch_, result);
  }

  absl::Status Project(const ProjectWork& work) override {
    GemmBf16Cpu(work, &pool_);
    return absl::OkStatus();
  }

  absl::Status Merge(const MergeWork& work) override {
    MergeCpu(work, &pool_);
    return absl::OkStatus();
  }

  absl::Status CompressStep(const CompressWork& work) override {
    CompressCpu(work, &pool_);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<GraphExecutor>> MakeGraph(const GraphSetup& setup) override {
    return MakeCpuGraph(*this, setup);
  }

 private:
  absl::Mutex step_mu_;
  ThreadPool pool_;  // serialises concurrent ParallelFor calls itself
  StepScratch scratch_ ABSL_GUARDED_BY(step_mu_);
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(unsigned num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace swa::cpu
