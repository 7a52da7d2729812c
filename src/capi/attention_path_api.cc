// swa_attention_cpu_path: which CPU attention path swa_step takes for a query
// dtype (docs/cpu_attention.md, "Paths").
#include "backend/backend.h"
#include "capi/enums.h"
#include "capi/error.h"
#include "common/status_macros.h"

SWA_API swa_status_t swa_attention_cpu_path(swa_dtype_t q_dtype, const char** name) {
  return swa::capi::Guard([&]() -> absl::Status {
    SWA_ASSIGN_OR_RETURN(const swa::Dtype dtype, swa::capi::ConvertDtype(q_dtype, "q_dtype"));
    SWA_CHECK_NOT_NULL(name);
    *name = swa::CpuAttentionPathName(dtype);
    return absl::OkStatus();
  });
}
