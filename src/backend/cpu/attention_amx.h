// Knobs of the AMX-BF16 attention driver (attention_amx.cc) for tests and
// benchmarks. Internal.
#pragma once

namespace swa::cpu {

// Whether the AMX driver writes a large in-place block output (at least
// 256 KiB: a DeepSeek-V4-like decode block) with non-temporal stores (the
// default) or with ordinary ones. The same bits either way; for tests and
// A/B runs only (not synchronised: set it while no step runs).
void SetAmxStreamingStores(bool on);

}  // namespace swa::cpu
