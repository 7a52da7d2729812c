// The CPU twin of the graph-capturable decode: the same contract with host
// pointers, run synchronously (the stream is ignored).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace swa::cpu {

// `backend` (a CPU backend) runs the steps and must outlive the executor.
std::unique_ptr<GraphExecutor> MakeCpuGraph(Backend& backend, const GraphSetup& setup);

}  // namespace swa::cpu
