// swacache: command-line tool over the public C API.
//   swacache demo   [--preset=deepseek-v4] [--layers=2] [--sequences=3] ...
//   swacache layout [--preset=gpt-oss]
//   swacache slots  [--slots=4]   (allocate every slot, print their offsets)
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "demo_run.h"
#include "layout_report.h"
#include "presets.h"
#include "swacache.h"

ABSL_FLAG(std::string, preset, "deepseek-v4", "model preset: deepseek-v4 or gpt-oss");
ABSL_FLAG(uint32_t, slots, 4, "state slots in the pool (layout)");
ABSL_FLAG(uint32_t, layers, 2, "demo: layers of the preset to run (stored and dropped)");
ABSL_FLAG(uint32_t, sequences, 3, "demo: concurrent sequences");
ABSL_FLAG(uint32_t, max_prompt, 160, "demo: longest prompt (tokens)");
ABSL_FLAG(uint32_t, chunk, 64, "demo: prefill chunk (tokens)");
ABSL_FLAG(uint32_t, decode_steps, 10, "demo: speculative decode steps per sequence");
ABSL_FLAG(uint64_t, seed, 1, "demo: random seed");

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
  absl::SetProgramUsageMessage("swacache <demo|layout|slots> [--preset=NAME] [flags]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() > 1 ? args[1] : "demo";
  if (cmd == "demo") {
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
  std::fprintf(stderr, "swacache: unknown command '%s' (try demo, layout or slots)\n", cmd.c_str());
  return 2;
}
