// Copy with non-temporal (streaming) stores, for the last step of a restore:
// the verified staging buffer goes into the slot without first reading the
// slot's old lines into the cache, and without evicting what is hot there.
#pragma once

#include <cstddef>

namespace swa {

// Same result as memcpy (non-overlapping buffers). Copies below 256 KiB, and
// CPUs without AVX2, use memcpy.
void StreamCopy(void* dst, const void* src, size_t bytes);

}  // namespace swa
