// A cache: layout + slot pool (backend memory) + slot table.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cache/slot_table.h"
#include "layout/layout.h"
#include "store/blob_store.h"
#include "cache/slot_io.h"
#include "cache/staging_pool.h"

namespace swa {

// Counters behind swa_cache_stats().
struct CacheCounters {
  std::atomic<uint64_t> steps{0};
  std::atomic<uint64_t> tokens{0};
  std::atomic<uint64_t> nonfinite_blocks{0};
};

struct CacheOptions {
  BackendKind backend = BackendKind::kCpu;
  int device = 0;
  unsigned num_threads = 0;
  void* pool = nullptr;    // caller-provided pool memory, or nullptr
  size_t pool_bytes = 0;
  BlobStoreSecurity store_security;  // namespace and secret of every store attached
};

class Cache {
 public:
  static absl::StatusOr<std::unique_ptr<Cache>> Create(const ModelSpec& spec,
                                                       const CacheOptions& options);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  const Layout& layout() const { return layout_; }
  SlotTable& slots() { return slots_; }
  const SlotTable& slots() const { return slots_; }
  Backend& backend() { return *backend_; }
  uint8_t* pool() const { return pool_; }
  // Layer `layer` (< num_layers) as the step kernels see it.
  StepLayer StepLayerOf(uint32_t layer) const;
  uint8_t* slot_base(uint32_t slot) const { return pool_ + layout_.SlotOffset(slot); }

  // Copies every byte and the metadata of `src` into `dst` (both allocated).
  absl::Status CopySlot(uint32_t src, uint32_t dst);

  CacheCounters& counters() { return counters_; }
  const CacheCounters& counters() const { return counters_; }

  // ---- External KV store (docs/semantics.md, "Store blob"; save/restore in src/store/)
  // Attaches `store` (nullptr detaches). A save/restore in flight keeps the
  // store it started with; the old one is released when the last user ends.
  void SetStore(std::shared_ptr<BlobStore> store);
  // The attached store; FAILED_PRECONDITION when there is none.
  absl::StatusOr<std::shared_ptr<BlobStore>> store() const;
  // The namespace and secret every store attached to this cache gets.
  const BlobStoreSecurity& store_security() const { return store_security_; }
  // What cache/slot_io.h needs to save or restore one of this cache's slots.
  SlotIo slot_io() {
    SlotIo io{&layout_, &slots_, backend_.get(), pool_, &store_staging_};
    io.compression = save_compression_.load(std::memory_order_relaxed) &&
                     layout_.compress_saved_bytes() > 0;
    return io;
  }
  // swa_cache_set_save_compression: blobs carry the compression section.
  void set_save_compression(bool on) { save_compression_.store(on, std::memory_order_relaxed); }
  // ---- end of the external KV store block ------------------------------------

 private:
  Cache(Layout layout, std::unique_ptr<Backend> backend);

  Layout layout_;
  std::unique_ptr<Backend> backend_;
  SlotTable slots_;
  uint8_t* pool_ = nullptr;
  bool owns_pool_ = false;
  CacheCounters counters_;
  std::vector<RopeTable> rope_;  // per layer, computed once

  // ---- External KV store --------------------------------------------------------
  mutable absl::Mutex store_mu_;
  std::shared_ptr<BlobStore> store_ ABSL_GUARDED_BY(store_mu_);
  StagingPool store_staging_;
  // On by default: without the section a restore leaves the compressor rings
  // as the slot had them, and the next windows would pool another sequence's
  // rows (only an engine that refills the rings itself turns it off).
  std::atomic<bool> save_compression_{true};
  BlobStoreSecurity store_security_;
  // ---- end of the external KV store block ------------------------------------
};

}  // namespace swa
