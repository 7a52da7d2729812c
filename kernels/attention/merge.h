// Merging two partial attentions (docs/semantics.md, "Merging partial
// attentions") on the device: plain-data params, template-free launcher.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/merge_work.h"

namespace swa::kernels {

// Device pointers of `work`; one CTA per row (grid-stride over rows), so that
// a merged LSE written over lse_a or lse_b is written after the row read it.
cudaError_t LaunchMerge(const MergeWork& work, cudaStream_t stream);

}  // namespace swa::kernels
