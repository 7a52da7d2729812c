// A cache: layout + slot pool (backend memory) + slot table.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cache/slot_table.h"
#include "layout/layout.h"

namespace swa {

struct CacheOptions {
  BackendKind backend = BackendKind::kCpu;
  int device = 0;
  unsigned num_threads = 0;
  void* pool = nullptr;    // caller-provided pool memory, or nullptr
  size_t pool_bytes = 0;
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
  uint8_t* slot_base(uint32_t slot) const { return pool_ + layout_.SlotOffset(slot); }

  // Copies every byte and the metadata of `src` into `dst` (both allocated).
  absl::Status CopySlot(uint32_t src, uint32_t dst);

 private:
  Cache(Layout layout, std::unique_ptr<Backend> backend);

  Layout layout_;
  std::unique_ptr<Backend> backend_;
  SlotTable slots_;
  uint8_t* pool_ = nullptr;
  bool owns_pool_ = false;
};

}  // namespace swa
