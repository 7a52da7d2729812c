// swa_layout_t from a Layout (swa_layout_compute and swa_cache_layout).
#pragma once

#include "layout/layout.h"
#include "swacache.h"

namespace swa::capi {

// Writes every field; keeps the caller's struct_size (already checked).
void FillLayout(const Layout& layout, swa_layout_t* out);

}  // namespace swa::capi
