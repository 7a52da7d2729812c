// swacache: command-line tool over the public C API.
//   swacache demo   [--preset=deepseek-v4] [--layers=2] [--sequences=3] ...
//   swacache layout [--preset=gpt-oss]
//   swacache slots  [--slots=4]   (allocate every slot, print their offsets)
//   swacache help [COMMAND] | --help   (commands and their flags)
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "args.h"
#include "demo_run.h"
#include "layout_report.h"
#include "presets.h"
#include "swacache.h"

ABSL_FLAG(std::string, preset, "deepseek-v4", "model preset: deepseek-v4, deepseek-v4-flash (compressor state in the slot) or gpt-oss");
ABSL_FLAG(uint32_t, slots, 4, "state slots in the pool, 1 ... 1048576");
ABSL_FLAG(uint32_t, layers, 2, "layers of the preset to run (stored and dropped), 1 ... the preset's count");
ABSL_FLAG(uint32_t, sequences, 3, "concurrent sequences, 1 ... 1024");
ABSL_FLAG(uint32_t, max_prompt, 160, "longest prompt (tokens), 1 ... 65536");
ABSL_FLAG(uint32_t, chunk, 64, "prefill chunk (tokens), 1 ... 65536");
ABSL_FLAG(uint32_t, decode_steps, 10, "speculative decode steps per sequence, 0 ... 65536");
ABSL_FLAG(uint64_t, seed, 1, "random seed");

namespace {

int Fail(const char* what, swa_status_t st) {
  std::fprintf(stderr, "swacache: %s failed: %s: %s\n", what, swa_status_string(st),
               swa_last_error());
  return 1;
}

// The subcommands and the flags each reads; `help` prints this table with
// every flag's help text and default taken from its ABSL_FLAG definition.
struct Command {
  const char* name;
  const char* summary;
  std::vector<const char*> flags;
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"demo",
       "run a model slice through chunked prefill, speculative decode and a\n"
       "store round trip, checking every output against an FP64 reference",
       {"preset", "layers", "sequences", "max_prompt", "chunk", "decode_steps", "seed"}},
      {"layout", "print a preset's slot layout and what a full cache would cost",
       {"preset", "slots"}},
      {"slots", "allocate every slot of a preset's pool and print their offsets",
       {"preset", "slots"}},
      {"help", "print this text (`swacache help COMMAND` for one command)", {}},
  };
  return commands;
}

void PrintCommand(const Command& c) {
  std::printf("  %s\n", c.name);
  for (const char* line = c.summary; *line;) {
    const char* end = std::strchr(line, '\n');
    const size_t n = end ? size_t(end - line) : std::strlen(line);
    std::printf("      %.*s\n", int(n), line);
    line += n + (end ? 1 : 0);
  }
  for (const char* name : c.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    std::printf("      --%-14s %s (default: %s)\n", name, flag->Help().c_str(),
                flag->DefaultValue().c_str());
  }
}

// Returns the exit code: 0, or 2 for an unknown command name.
int PrintHelp(const std::string& only) {
  bool found = only.empty();
  if (only.empty())
    std::printf("usage: swacache <command> [--flag=value ...]   (default command: demo)\n\n"
                "commands:\n");
  for (const Command& c : Commands()) {
    if (!only.empty() && only != c.name) continue;
    found = true;
    PrintCommand(c);
  }
  if (!found) {
    std::fprintf(stderr, "swacache: unknown command '%s' (try: swacache help)\n", only.c_str());
    return 2;
  }
  if (only.empty())
    std::printf("\n--helpfull lists every flag of the program, the libraries' included.\n");
  return 0;
}

bool IsHelpFlag(const char* arg) {
  return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-help") == 0 ||
         std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--helpshort") == 0;
}

// Prints `message` (when not empty) as a usage error; true when it did.
bool UsageError(const std::string& message) {
  if (message.empty()) return false;
  std::fprintf(stderr, "swacache: %s\n", message.c_str());
  return true;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& c : Commands())
    if (name == c.name) return &c;
  return nullptr;
}

int RunLayout(bool allocate) {
  if (UsageError(swacache_cli::OutOfRange("slots", absl::GetFlag(FLAGS_slots), 1,
                                          swacache_cli::kMaxSlotsFlag)))
    return 2;
  swacache_cli::Preset preset;
  if (!swacache_cli::MakePreset(absl::GetFlag(FLAGS_preset), absl::GetFlag(FLAGS_slots), &preset)) {
    std::fprintf(stderr, "swacache: unknown preset '%s'\n", absl::GetFlag(FLAGS_preset).c_str());
    return 2;
  }
  swa_cache_t* cache = nullptr;
  if (swa_status_t st = swa_cache_create(&preset.config, &cache); st != SWA_OK)
    return Fail("swa_cache_create", st);
  std::printf("libswacache %s — preset %s\n%s\n\n", swa_version_string(), preset.name.c_str(),
              preset.description.c_str());
  if (allocate) {
    std::vector<uint32_t> slots(preset.config.max_slots);
    for (uint32_t& s : slots)
      if (swa_status_t st = swa_slot_alloc(cache, &s); st != SWA_OK) {
        swa_cache_destroy(cache);
        return Fail("swa_slot_alloc", st);
      }
    std::printf("allocated %zu slots:", slots.size());
    for (uint32_t s : slots) {
      swa_slot_info_t info;
      info.struct_size = sizeof info;
      swa_slot_info(cache, s, &info);
      std::printf(" #%u@%llu", s, static_cast<unsigned long long>(info.byte_offset));
    }
    std::printf("\n\n");
  }
  swacache_cli::PrintLayoutReport(cache);
  swa_cache_destroy(cache);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("swacache <demo|layout|slots|help> [--flag=value ...]");
  // Help is answered before absl parses the flags: absl's own --help lists
  // only flags defined in a file named after the program, i.e. none here.
  for (int i = 1; i < argc; ++i) {
    if (IsHelpFlag(argv[i])) {
      const bool has_cmd = i > 1 && argv[1][0] != '-';
      return PrintHelp(has_cmd ? argv[1] : "");
    }
  }
  // absl keeps the last of a repeated flag silently: refuse it instead.
  std::set<std::string> given;
  if (UsageError(swacache_cli::RepeatedFlag(argc, argv, &given))) return 2;
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() > 1 ? args[1] : "demo";
  const size_t max_words = cmd == "help" ? 3 : 2;  // program, command[, command for help]
  if (args.size() > max_words &&
      UsageError(std::string("unexpected argument '") + args[max_words] + "' after '" + cmd + "'"))
    return 2;
  if (cmd == "help") return PrintHelp(args.size() > 2 ? args[2] : "");
  if (const Command* c = FindCommand(cmd);
      c != nullptr && UsageError(swacache_cli::UnreadFlag(cmd, c->flags, given)))
    return 2;
  if (cmd == "demo") {
    using swacache_cli::OutOfRange;
    if (UsageError(OutOfRange("sequences", absl::GetFlag(FLAGS_sequences), 1,
                              swacache_cli::kMaxSequences)) ||
        UsageError(OutOfRange("max_prompt", absl::GetFlag(FLAGS_max_prompt), 1,
                              swacache_cli::kMaxPrompt)) ||
        UsageError(OutOfRange("chunk", absl::GetFlag(FLAGS_chunk), 1, swacache_cli::kMaxChunk)) ||
        UsageError(OutOfRange("decode_steps", absl::GetFlag(FLAGS_decode_steps), 0,
                              swacache_cli::kMaxDecodeSteps)))
      return 2;
    swacache_cli::DemoOptions o;
    o.preset = absl::GetFlag(FLAGS_preset);
    o.layers = absl::GetFlag(FLAGS_layers);
    o.sequences = absl::GetFlag(FLAGS_sequences);
    o.max_prompt = absl::GetFlag(FLAGS_max_prompt);
    o.chunk = absl::GetFlag(FLAGS_chunk);
    o.decode_steps = absl::GetFlag(FLAGS_decode_steps);
    o.seed = absl::GetFlag(FLAGS_seed);
    return swacache_cli::RunDemo(o);
  }
  if (cmd == "slots") return RunLayout(/*allocate=*/true);
  if (cmd == "layout") return RunLayout(/*allocate=*/false);
  std::fprintf(stderr, "swacache: unknown command '%s' (try: swacache help)\n", cmd.c_str());
  return 2;
}
