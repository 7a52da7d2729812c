// The Status section: swa_status_string, swa_last_error, and the C boundary's
// status conversion.
#include "capi/error.h"

#include <string>

namespace swa::capi {
namespace {
thread_local std::string g_last_error;
}  // namespace

swa_status_t Report(const absl::Status& status) {
  if (status.ok()) return SWA_OK;
  g_last_error.assign(status.message().data(), status.message().size());
  const int code = static_cast<int>(status.code());
  return (code >= 0 && code <= SWA_UNAUTHENTICATED) ? static_cast<swa_status_t>(code)
                                                   : SWA_UNKNOWN;
}

}  // namespace swa::capi

extern "C" {

SWA_API const char* swa_last_error(void) { return swa::capi::g_last_error.c_str(); }

SWA_API const char* swa_status_string(swa_status_t status) {
  switch (swa::capi::RawEnum(status)) {
    case SWA_OK: return "OK";
    case SWA_CANCELLED: return "CANCELLED";
    case SWA_UNKNOWN: return "UNKNOWN";
    case SWA_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case SWA_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case SWA_NOT_FOUND: return "NOT_FOUND";
    case SWA_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case SWA_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case SWA_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case SWA_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case SWA_ABORTED: return "ABORTED";
    case SWA_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case SWA_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case SWA_INTERNAL: return "INTERNAL";
    case SWA_UNAVAILABLE: return "UNAVAILABLE";
    case SWA_DATA_LOSS: return "DATA_LOSS";
    case SWA_UNAUTHENTICATED: return "UNAUTHENTICATED";
  }
  return "UNRECOGNIZED_STATUS";
}

}  // extern "C"
