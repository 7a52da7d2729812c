#pragma once

#include "swacache.h"

namespace swacache_cli {

// Prints the slot layout of `cache` as a table, then what a full (non-windowed)
// cache of the same layers would cost per sequence (SPEC section 9).
void PrintLayoutReport(const swa_cache_t* cache);

}  // namespace swacache_cli
