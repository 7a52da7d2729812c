// swa_compress_step on host memory (backend/compress_work.h): every closing
// window's entry (common/compress_entry.h), then the store of the new rows.
#pragma once

#include "backend/compress_work.h"

namespace swa::cpu {

class ThreadPool;

// Windows are spread over `pool` (nullptr: the calling thread); every window
// is read before the first row is stored.
void CompressCpu(const CompressWork& work, ThreadPool* pool);

}  // namespace swa::cpu
