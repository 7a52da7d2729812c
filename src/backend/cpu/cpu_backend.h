// The CPU backend's factory (used by MakeBackend and by tests).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace swa::cpu {

// `num_threads` = 0 means the machine's hardware threads.
std::unique_ptr<Backend> MakeCpuBackend(unsigned num_threads);

}  // namespace swa::cpu
