#include "args.h"

#include <cstring>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_format.h"

namespace swacache_cli {
namespace {

// The flags this tool defines (main.cc); absl's own (--flagfile, ...) are not checked.
const char* const kToolFlags[] = {"preset",     "slots", "layers",       "sequences",
                                  "max_prompt", "chunk", "decode_steps", "seed"};

}  // namespace

std::string RepeatedFlag(int argc, char** argv, std::set<std::string>* given) {
  std::set<std::string>& seen = *given;
  seen.clear();
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) break;
    if (arg[0] != '-' || arg[1] == '\0') continue;
    const char* name = arg + (arg[1] == '-' ? 2 : 1);
    const char* eq = std::strchr(name, '=');
    const std::string key = eq ? std::string(name, eq) : std::string(name);
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(key);
    // "--slots 5": the next word is the value, even when it starts with '-'.
    if (eq == nullptr && flag != nullptr && !flag->IsOfType<bool>()) ++i;
    if (!seen.insert(key).second)
      return absl::StrFormat("--%s is given more than once", key);
  }
  return "";
}

std::string UnreadFlag(const std::string& command, const std::vector<const char*>& reads,
                       const std::set<std::string>& given) {
  for (const char* name : kToolFlags) {
    if (given.count(name) == 0) continue;
    bool read = false;
    for (const char* r : reads) read = read || std::strcmp(r, name) == 0;
    if (!read)
      return absl::StrFormat("--%s is not an option of '%s' (try: swacache help %s)", name,
                             command, command);
  }
  return "";
}

std::string OutOfRange(const char* name, uint64_t value, uint64_t lo, uint64_t hi) {
  if (value >= lo && value <= hi) return "";
  return absl::StrFormat("--%s = %u is out of range [%u, %u]", name, value, lo, hi);
}

}  // namespace swacache_cli
