// Definitions of the opaque C handles.
#pragma once

#include <memory>

#include "cache/cache.h"
#include "swacache.h"

struct swa_cache {
  std::unique_ptr<swa::Cache> impl;
};
