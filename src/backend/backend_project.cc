// Backend::Project's default: the blocked CPU GEMM on host memory.
#include "backend/backend.h"
#include "project/gemm_cpu.h"

namespace swa {

absl::Status Backend::Project(const ProjectWork& work) {
  project::GemmBf16Cpu(work, 0);
  return absl::OkStatus();
}

}  // namespace swa
