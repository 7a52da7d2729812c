#include "cache/cache.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace swa {

Cache::Cache(Layout layout, std::unique_ptr<Backend> backend)
    : layout_(std::move(layout)), backend_(std::move(backend)), slots_(layout_.max_slots()) {}

Cache::~Cache() {
  if (owns_pool_) backend_->Free(pool_, layout_.pool_bytes());
}

absl::StatusOr<std::unique_ptr<Cache>> Cache::Create(const ModelSpec& spec,
                                                     const CacheOptions& options) {
  SWA_ASSIGN_OR_RETURN(Layout layout, Layout::Create(spec));
  SWA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                       MakeBackend(options.backend, options.device, options.num_threads));
  for (uint32_t i = 0; i < layout.num_layers(); ++i)
    if (absl::Status st = backend->Supports(spec.layers[i]); !st.ok())
      return absl::Status(st.code(), absl::StrFormat("layers[%u]: %s", i, st.message()));

  std::unique_ptr<Cache> cache(new Cache(std::move(layout), std::move(backend)));
  for (const LayerSpec& l : spec.layers) cache->rope_.push_back(MakeRopeTable(l.rope));
  cache->store_security_ = options.store_security;
  const Layout& lay = cache->layout_;
  if (options.pool != nullptr) {
    const auto addr = reinterpret_cast<uintptr_t>(options.pool);
    if (addr % lay.alignment() != 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "pool = %p is not aligned to alignment = %u bytes", options.pool, lay.alignment()));
    if (options.pool_bytes < lay.pool_bytes())
      return absl::InvalidArgumentError(absl::StrFormat(
          "pool_bytes = %u is smaller than max_slots * slot_bytes = %u * %u = %u",
          options.pool_bytes, lay.max_slots(), lay.slot_bytes(), lay.pool_bytes()));
    cache->pool_ = static_cast<uint8_t*>(options.pool);
  } else {
    SWA_ASSIGN_OR_RETURN(void* pool, cache->backend_->Allocate(lay.pool_bytes(), lay.alignment()));
    cache->pool_ = static_cast<uint8_t*>(pool);
    cache->owns_pool_ = true;
  }
  return cache;
}

StepLayer Cache::StepLayerOf(uint32_t layer) const {
  const LayerSpec& spec = layout_.spec().layers[layer];
  const LayerLayout& ll = layout_.layer(layer);
  StepLayer l;
  l.ring = RingRows{pool_ + ll.ring_offset, layout_.slot_bytes(), ll.bytes_per_token,
                    static_cast<int32_t>(layout_.ring_len())};
  l.vec_bytes = ll.vec_bytes;
  l.window = static_cast<int32_t>(layout_.window());
  l.format = spec.format;
  l.scale_mode = layout_.spec().scale_mode;
  l.q_heads = static_cast<int>(spec.q_heads);
  l.kv_heads = static_cast<int>(spec.kv_heads);
  l.head_dim = static_cast<int>(spec.head_dim);
  l.shared_kv = spec.shared_kv;
  l.rope = &rope_[layer];
  l.softcap = spec.logit_softcap;
  l.softmax_scale = spec.softmax_scale;
  return l;
}

absl::Status Cache::CopySlot(uint32_t src, uint32_t dst) {
  absl::MutexLock lock(&slots_.mu());
  SWA_RETURN_IF_ERROR(slots_.CheckPlannableLocked(src));
  SWA_RETURN_IF_ERROR(slots_.CheckPlannableLocked(dst));
  // A running step writes src's rings and reads and writes dst's.
  SWA_RETURN_IF_ERROR(slots_.CheckNotSteppingLocked(src, "copying from it"));
  SWA_RETURN_IF_ERROR(slots_.CheckNotSteppingLocked(dst, "copying into it"));
  if (src == dst) return absl::OkStatus();
  // Reading a held src is fine (its lengths are host-known); a held dst would
  // get the graph's stale lengths written over the copied sequence.
  SWA_RETURN_IF_ERROR(slots_.CheckNotHeldLocked(dst, "copying into it"));
  SWA_RETURN_IF_ERROR(backend_->Copy(slot_base(dst), slot_base(src), layout_.slot_bytes()));
  SlotTable::CopyPositions(slots_.StateLocked(src), &slots_.StateLocked(dst));
  ++slots_.StateLocked(dst).epoch;  // dst holds another sequence: older plans of it must not run
  return absl::OkStatus();
}

// ---- External KV store (docs/semantics.md, "Store blob"; save/restore live in src/store/)

void Cache::SetStore(std::shared_ptr<BlobStore> store) {
  std::shared_ptr<BlobStore> old;
  {
    absl::MutexLock lock(&store_mu_);
    old = std::exchange(store_, std::move(store));
  }
  // `old` is released here, outside the lock (its release callback may call us).
}

absl::StatusOr<std::shared_ptr<BlobStore>> Cache::store() const {
  absl::MutexLock lock(&store_mu_);
  if (store_ == nullptr)
    return absl::FailedPreconditionError(
        "no external KV store is attached to this cache (see swa_cache_set_store)");
  return store_;
}

// ---- end of the external KV store block ---------------------------------------

}  // namespace swa
