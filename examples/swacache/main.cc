// swacache: command-line tool over the public C API.
//   swacache demo   [--preset=deepseek-v4] [--slots=4]
//   swacache layout [--preset=gpt-oss]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "layout_report.h"
#include "presets.h"
#include "swacache.h"

ABSL_FLAG(std::string, preset, "deepseek-v4", "model preset: deepseek-v4 or gpt-oss");
ABSL_FLAG(uint32_t, slots, 4, "state slots in the pool");

namespace {

int Fail(const char* what, swa_status_t st) {
  std::fprintf(stderr, "swacache: %s failed: %s: %s\n", what, swa_status_string(st),
               swa_last_error());
  return 1;
}

int RunLayout(bool allocate) {
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
  absl::SetProgramUsageMessage("swacache <demo|layout> [--preset=NAME] [--slots=N]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() > 1 ? args[1] : "demo";
  if (cmd == "demo") return RunLayout(/*allocate=*/true);
  if (cmd == "layout") return RunLayout(/*allocate=*/false);
  std::fprintf(stderr, "swacache: unknown command '%s' (try demo or layout)\n", cmd.c_str());
  return 2;
}
