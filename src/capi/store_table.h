// A C++ KvStore handed out as a swa_kv_store_t (the built-in stores): its
// callbacks are trampolines into the store, and release deletes it. When
// such a table comes back through swa_cache_set_store(), AdoptTable()
// recognises the trampolines and takes the C++ store itself, so the cache
// calls it without a C hop.
//
// Every store handed out this way is in a process-wide registry of live
// built-in stores, unclaimed until a cache or a tiered store adopts it,
// claimed after, gone once it is released. A table is adopted once: a second
// hand-over of a claimed store, or of one already released (looked up by
// address, never dereferenced), is refused. Release through the table frees
// only an unclaimed store; for a claimed or released one it does nothing.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/kv_store.h"
#include "swacache.h"

namespace swa::capi {

// A callback table that owns `store` (release deletes it), registered as a
// live unclaimed built-in store; `kind` ("memory", ...) names it in messages
// and must be a string literal.
swa_kv_store_t MakeStoreTable(std::unique_ptr<KvStore> store, const char* kind = "built-in");

// The KvStore behind a table made by MakeStoreTable (every entry still the
// trampoline it set) whose store is still live, or nullptr for any other
// table or a released store. Borrowed.
KvStore* StoreFromTable(const swa_kv_store_t& table);

// Takes ownership of the store a table describes: for a MakeStoreTable table
// the C++ store itself (claimed; calls reach it without a C hop, or through
// the callbacks when the caller replaced an entry other than release), else a
// CallbackStore around the table. `what` names the table in messages
// ("store", "tier 2"). On failure (bad struct_size, neither put nor get, a
// built-in store already claimed or released) nothing is claimed and the
// caller still owns user_data.
absl::StatusOr<std::unique_ptr<KvStore>> AdoptTable(const swa_kv_store_t& table,
                                                    const char* what = "store");

// AdoptTable for several tables at once, all or nothing: tables[i] is named
// "tier i" in messages.
absl::StatusOr<std::vector<std::unique_ptr<KvStore>>> AdoptTables(
    absl::Span<const swa_kv_store_t> tables);

// Hands a store AdoptTable returned back to the caller, unused (an attach
// that failed after the adoption): a built-in store is unclaimed, not
// deleted, and an engine's release is not called.
void Unadopt(std::unique_ptr<KvStore> store);

// The built-in store an adopted store runs on, or nullptr when it is not one.
KvStore* BuiltinBehind(const KvStore& adopted);

}  // namespace swa::capi
