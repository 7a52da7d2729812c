// Checks of the swacache command line that absl's parser does not make: a flag
// given twice, words after the command, a flag the command does not read, and
// values outside the range a command can use. Each failure prints one line
// naming the option to stderr; the caller exits with 2.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace swacache_cli {

// Before absl::ParseCommandLine: "" when every flag appears at most once in
// argv (up to a "--" terminator), else a message naming the repeated flag.
// `given` receives the names of the flags given.
std::string RepeatedFlag(int argc, char** argv, std::set<std::string>* given);

// After parsing: a message naming the first of this tool's flags in `given`
// that is not in `reads` (the command's list); "" when there is none.
std::string UnreadFlag(const std::string& command, const std::vector<const char*>& reads,
                       const std::set<std::string>& given);

// "" when lo <= value <= hi, else "--name = value is out of range [lo, hi]".
std::string OutOfRange(const char* name, uint64_t value, uint64_t lo, uint64_t hi);

// The most state slots a pool may have (swa_config_t::max_slots) and the
// demo's limits (its FP64 reference keeps every key of every sequence).
inline constexpr uint32_t kMaxSlotsFlag = 1u << 20;
inline constexpr uint32_t kMaxSequences = 1024;
inline constexpr uint32_t kMaxPrompt = 1u << 16;
inline constexpr uint32_t kMaxChunk = 1u << 16;
inline constexpr uint32_t kMaxDecodeSteps = 1u << 16;

}  // namespace swacache_cli
