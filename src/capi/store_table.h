// A C++ KvStore handed out as a swa_kv_store_t (the built-in stores): its
// callbacks are trampolines into the store, and release deletes it. When
// such a table comes back through swa_cache_set_store(), AdoptTable()
// recognises the trampolines and takes the C++ store itself, so the cache
// calls it without a C hop.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/kv_store.h"
#include "swacache.h"

namespace swa::capi {

// A callback table that owns `store` (release deletes it).
swa_kv_store_t MakeStoreTable(std::unique_ptr<KvStore> store);

// The KvStore behind a table made by MakeStoreTable (every entry still the
// trampoline it set), or nullptr for any other table. Borrowed.
KvStore* StoreFromTable(const swa_kv_store_t& table);

// Takes ownership of the store a table describes: the C++ store itself for a
// MakeStoreTable table, else a CallbackStore around the table. On failure
// (bad struct_size, neither put nor get) the caller still owns user_data.
absl::StatusOr<std::unique_ptr<KvStore>> AdoptTable(const swa_kv_store_t& table);

}  // namespace swa::capi
