#pragma once

#include <cstdint>
#include <string>

namespace swacache_cli {

struct DemoOptions {
  std::string preset = "deepseek-v4";
  uint32_t layers = 2;         // layers of the preset to run (half stored, half dropped)
  uint32_t sequences = 3;
  uint32_t max_prompt = 160;   // prompt lengths are drawn in [max_prompt / 2, max_prompt]
  uint32_t chunk = 64;         // prefill chunk
  uint32_t decode_steps = 10;  // speculative steps per sequence
  uint64_t seed = 1;
};

// A full run over the public API: chunked prefill (staged path), speculative
// decode with random acceptance (ring-only path), mixed batches, a save and
// restore through the built-in memory store, every output checked against the
// FP64 dense reference. Prints a summary; returns the process exit code.
int RunDemo(const DemoOptions& options);

}  // namespace swacache_cli
