package swacache

/*
#include <stdlib.h>
#include "capi.h"

static swago_ret swago_tiered_create(const swa_kv_store_t* tiers, size_t n, swa_kv_store_t* out) {
  swa_store_tiered_config_t c;
  swa_store_tiered_config_init(&c);
  c.tiers = tiers;
  c.n_tiers = n;
  swa_kv_store_init(out);
  return swago_r(swa_store_tiered_create(&c, out));
}
static swago_ret swago_tiered_stats(const swa_kv_store_t* t, uint32_t tier,
                                    swa_store_tier_stats_t* out) {
  return swago_r(swa_store_tiered_stats(t, tier, out));
}
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sort"
	"unsafe"
)

// NewTieredStore creates a store over tiers, fastest first
// (swa_store_tiered_create; experimental in the C API): a get asks each tier
// in order and copies a hit into the faster ones; a put writes the slowest
// tier first, so a failed put is never visible. A tier is a *BuiltinStore,
// used as the library's own table, or any other Store, bridged as by
// Cache.SetStore. On success the tiered store owns every tier: the
// *BuiltinStore tiers become closed (their methods return ErrClosed), and
// each Go store is released when the tiered store is. On failure the caller
// still owns every tier. A nil tier, a closed *BuiltinStore or the same
// *BuiltinStore twice is INVALID_ARGUMENT; no tiers or more than 16 is
// INVALID_ARGUMENT from the library. Thread-safe.
func NewTieredStore(tiers ...Store) (*BuiltinStore, error) {
	var builtins []*BuiltinStore
	for i, s := range tiers {
		switch st := s.(type) {
		case nil:
			return nil, errorf(CodeInvalidArgument, "tiers[%d] is nil", i)
		case *BuiltinStore:
			if st == nil {
				return nil, errorf(CodeInvalidArgument, "tiers[%d] is a nil *BuiltinStore", i)
			}
			for j, b := range builtins {
				if b == st {
					return nil, errorf(CodeInvalidArgument, "tiers[%d] is the same store as an earlier tier (%d)", i, j)
				}
			}
			builtins = append(builtins, st)
		}
	}
	// Lock the built-in tiers in address order (no deadlock between two
	// concurrent calls over overlapping tiers) for the hand-over.
	locked := append([]*BuiltinStore(nil), builtins...)
	sort.Slice(locked, func(a, b int) bool {
		return uintptr(unsafe.Pointer(locked[a])) < uintptr(unsafe.Pointer(locked[b]))
	})
	for _, b := range locked {
		b.mu.Lock()
		defer b.mu.Unlock()
	}
	for _, b := range builtins {
		if !b.live {
			return nil, closedError("tier store")
		}
	}
	n := len(tiers)
	var arr *C.swa_kv_store_t
	if n > 0 {
		arr = (*C.swa_kv_store_t)(C.calloc(C.size_t(n), C.sizeof_swa_kv_store_t))
		if arr == nil {
			return nil, errorf(CodeResourceExhausted, "cannot allocate %d tier tables", n)
		}
		defer C.free(unsafe.Pointer(arr))
	}
	tbl := unsafe.Slice(arr, n)
	var handles []cgo.Handle
	var bound []*boundStore
	for i, s := range tiers {
		if b, ok := s.(*BuiltinStore); ok {
			tbl[i] = b.tbl
			bound = append(bound, b.goTiers...)
			continue
		}
		// Bound to a cache when the tiered store is attached (attach).
		bs := &boundStore{s: s}
		bound = append(bound, bs)
		h := cgo.NewHandle(bs)
		handles = append(handles, h)
		goTable(h, &tbl[i])
	}
	var out C.swa_kv_store_t
	if err := result(C.swago_tiered_create(arr, C.size_t(n), &out)); err != nil {
		for _, h := range handles {
			h.Delete() // The library took nothing; no Release.
		}
		return nil, err
	}
	for _, b := range builtins {
		b.live = false // The tiered store owns it now.
		runtime.SetFinalizer(b, nil)
	}
	ts := newBuiltin(out)
	ts.goTiers = bound
	return ts, nil
}

// TierStats are the counters of one tier of a tiered store
// (swa_store_tier_stats_t).
type TierStats struct {
	Hits         uint64 // Gets this tier answered.
	Misses       uint64 // Gets this tier did not have the key for.
	Errors       uint64 // Calls of this tier that failed otherwise.
	BytesRead    uint64 // Blob bytes of the hits.
	Puts         uint64 // Successful puts into this tier, promotions included.
	BytesWritten uint64 // Blob bytes of those puts.
	Promotions   uint64 // Puts that copied a hit up from a slower tier.
}

// TierStats reads the statistics of tier (0 = fastest) of an unattached
// tiered store (swa_store_tiered_stats): INVALID_ARGUMENT for another kind of
// store, OUT_OF_RANGE past the last tier. Thread-safe.
func (s *BuiltinStore) TierStats(tier uint32) (TierStats, error) {
	if err := s.acquire(); err != nil {
		return TierStats{}, err
	}
	defer s.mu.RUnlock()
	var o C.swa_store_tier_stats_t
	o.struct_size = C.sizeof_swa_store_tier_stats_t
	if err := result(C.swago_tiered_stats(&s.tbl, C.uint32_t(tier), &o)); err != nil {
		return TierStats{}, err
	}
	return TierStats{Hits: uint64(o.hits), Misses: uint64(o.misses), Errors: uint64(o.errors),
		BytesRead: uint64(o.bytes_read), Puts: uint64(o.puts), BytesWritten: uint64(o.bytes_written),
		Promotions: uint64(o.promotions)}, nil
}
