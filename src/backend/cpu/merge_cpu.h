// swa_attention_merge on host memory.
#pragma once

#include "common/merge_work.h"

namespace swa::cpu {

class ThreadPool;

// Rows are spread over `pool` (nullptr: the calling thread).
void MergeCpu(const MergeWork& work, ThreadPool* pool);

}  // namespace swa::cpu
