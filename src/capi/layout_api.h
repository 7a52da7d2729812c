// swa_layout_t from a Layout (swa_layout_compute and swa_cache_layout).
#pragma once

#include "layout/layout.h"
#include "swacache.h"

namespace swa::capi {

// Every field of the layout (struct_size 0: capi::WriteStruct sets the caller's).
swa_layout_t LayoutStruct(const Layout& layout);

}  // namespace swa::capi
