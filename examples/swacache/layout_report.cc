#include "layout_report.h"

#include <cstdio>
#include <string>

namespace swacache_cli {
namespace {

const char* FormatName(swa_format_t f) {
  switch (f) {
    case SWA_FORMAT_MXFP8: return "MXFP8";
    case SWA_FORMAT_BF16: return "BF16";
    case SWA_FORMAT_FP32: return "FP32";
    case SWA_FORMAT_FP8_DS_MLA: return "DS_MLA";
  }
  return "?";
}

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

}  // namespace

void PrintLayoutReport(const swa_cache_t* cache) {
  swa_layout_t lay;
  lay.struct_size = sizeof lay;
  if (swa_cache_layout(cache, &lay) != SWA_OK) return;
  std::printf("window W %u, draft tokens N %u, ring R %u (ring-only steps take up to %u tokens)\n",
              lay.window, lay.draft_tokens, lay.ring_len, lay.max_ring_tokens);
  std::printf("layout fingerprint %016llx, alignment %u bytes\n\n",
              static_cast<unsigned long long>(lay.fingerprint), lay.alignment);
  std::printf("%-6s %-8s %-6s %-8s %12s %12s %10s\n", "layer", "role", "format", "region",
              "offset", "bytes", "B/token");
  double bytes_per_token_all = 0;
  for (int pass = 0; pass < 3; ++pass) {  // stored rings, dropped rings, compression
    for (uint32_t i = 0; i < lay.num_layers; ++i) {
      swa_layer_layout_t ll;
      ll.struct_size = sizeof ll;
      if (swa_cache_layer_layout(cache, i, &ll) != SWA_OK) return;
      if (pass < 2 && static_cast<int>(ll.role) != pass) continue;
      if (pass == 2 && ll.compress_len == 0) continue;
      if (pass < 2) bytes_per_token_all += ll.bytes_per_token;
      // Typed compressors: "hca"/"csa" rings of L source rows (B/row), then the
      // CSA indexer's ring ("index").
      const char* region = pass < 2                                   ? "ring"
                           : ll.compress_kind == SWA_COMPRESS_HCA ? "hca"
                           : ll.compress_kind == SWA_COMPRESS_CSA ? "csa"
                                                                  : "compress";
      // A typed compressor's rows are FP32 or BF16 (entry = kv + gate halves),
      // whatever the ring's format.
      const char* format = FormatName(ll.kv_format);
      if (pass == 2 && ll.compress_kind != SWA_COMPRESS_OPAQUE && ll.compress_row_values != 0)
        format = ll.compress_entry_bytes / (2 * ll.compress_row_values) == 2 ? "BF16" : "FP32";
      std::printf("%-6u %-8s %-6s %-8s %12llu %12llu %10u\n", i,
                  ll.role == SWA_LAYER_STORED ? "stored" : "dropped", format, region,
                  static_cast<unsigned long long>(pass < 2 ? ll.ring_offset : ll.compress_offset),
                  static_cast<unsigned long long>(pass < 2 ? ll.ring_bytes : ll.compress_bytes),
                  pass < 2 ? ll.bytes_per_token : ll.compress_entry_bytes);
      if (pass == 2 && ll.index_row_bytes != 0)
        std::printf("%-6u %-8s %-6s %-8s %12llu %12llu %10u\n", i,
                    ll.role == SWA_LAYER_STORED ? "stored" : "dropped", format, "index", static_cast<unsigned long long>(ll.index_offset),
                    static_cast<unsigned long long>(ll.index_bytes), ll.index_row_bytes);
    }
  }
  if (lay.compress_bytes != 0)
    std::printf("\ncompression regions: %s per slot (%s of typed compressor rings saved with "
                "swa_cache_set_save_compression)\n",
                Bytes(lay.compress_bytes).c_str(), Bytes(lay.compress_saved_bytes).c_str());
  std::printf("\nper sequence: slot %s (stored, persisted: %s), pool %s for %u slots\n",
              Bytes(lay.slot_bytes).c_str(), Bytes(lay.stored_bytes).c_str(),
              Bytes(lay.pool_bytes).c_str(), lay.max_slots);
  // The exact figures, for scripts and for checking against swa_layout_compute().
  std::printf("bytes: slot %llu, stored %llu, compress %llu, compress saved %llu, pool %llu\n",
              static_cast<unsigned long long>(lay.slot_bytes),
              static_cast<unsigned long long>(lay.stored_bytes),
              static_cast<unsigned long long>(lay.compress_bytes),
              static_cast<unsigned long long>(lay.compress_saved_bytes),
              static_cast<unsigned long long>(lay.pool_bytes));
  std::printf("\n%-10s %18s %18s %8s\n", "context", "full cache/seq", "swacache/seq", "ratio");
  for (double tokens : {8192.0, 32768.0, 131072.0}) {
    // The same layers keeping every token in the same format (docs/semantics.md).
    const double full = tokens * bytes_per_token_all;
    std::printf("%-10s %18s %18s %7.1fx\n",
                (std::to_string(static_cast<int>(tokens / 1024)) + "K").c_str(),
                Bytes(full).c_str(), Bytes(lay.slot_bytes).c_str(), full / lay.slot_bytes);
  }
}

}  // namespace swacache_cli
