#pragma once

#include "swacache.h"

namespace swacache_cli {

// Prints the slot layout of `cache` as a table, then what a full (non-windowed)
// cache of the same layers would cost per sequence (docs/semantics.md, "Memory arithmetic").
void PrintLayoutReport(const swa_cache_t* cache);

}  // namespace swacache_cli
