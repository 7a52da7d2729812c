// swa_config_t -> ModelSpec + CacheOptions, every field validated.
#pragma once

#include "absl/status/status.h"
#include "cache/cache.h"
#include "layout/model_spec.h"
#include "swacache.h"

namespace swa::capi {

absl::Status ConvertConfig(const swa_config_t* config, ModelSpec* spec, CacheOptions* options);

}  // namespace swa::capi
