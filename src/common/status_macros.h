// Early-return helpers for absl::Status / absl::StatusOr.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SWA_CONCAT_INNER_(a, b) a##b
#define SWA_CONCAT_(a, b) SWA_CONCAT_INNER_(a, b)

#define SWA_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    ::absl::Status swa_status_ = (expr);           \
    if (!swa_status_.ok()) return swa_status_;     \
  } while (0)

#define SWA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)

#define SWA_ASSIGN_OR_RETURN(lhs, expr) \
  SWA_ASSIGN_OR_RETURN_IMPL_(SWA_CONCAT_(swa_statusor_, __LINE__), lhs, expr)
