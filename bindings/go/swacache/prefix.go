package swacache

// Prefix reuse (issue 32): checkpoints (SaveAt, CheckpointRange), the
// longest-prefix probe (StoreProbe) and the exact replay span
// (BeginReplayExact). docs/semantics.md, "Checkpoints" and "Exact replay";
// docs/store.md, "Longest-prefix probe".

// #include "capi.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// CheckpointRange returns the positions lo ... hi that SaveAt accepts for the
// slot now (swa_slot_checkpoint_range): hi is WrittenEnd, lo the lowest
// position whose window history the ring still holds; lo > hi when none.
// Thread-safe.
func (c *Cache) CheckpointRange(slot uint32) (lo, hi int32, err error) {
	p, err := c.s.acquire()
	if err != nil {
		return 0, 0, err
	}
	defer c.s.release()
	var a, b C.int32_t
	err = result(C.swago_slot_checkpoint_range(p, C.uint32_t(slot), &a, &b))
	runtime.KeepAlive(c)
	return int32(a), int32(b), err
}

// SaveAt saves a checkpoint: the slot as it stood at position (its blob
// records WrittenEnd = position), under key (swa_slot_save_at). A position
// outside CheckpointRange is OUT_OF_RANGE naming the range; nothing is
// written then. Otherwise as Save. key is not kept.
func (c *Cache) SaveAt(slot uint32, position int32, key []byte) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_save_at(cp, C.uint32_t(slot), C.int32_t(position), keyPtr(key),
		C.size_t(len(key))))
	runtime.KeepAlive(key)
	runtime.KeepAlive(c)
	return err
}

// maxProbeKeys is swa_cache_store_probe's limit on n_keys (swacache.h:
// "n_keys 0 ... 4096").
const maxProbeKeys = 4096

// probeKeyCount is n as the C call's uint32_t count, or INVALID_ARGUMENT
// past maxProbeKeys (a larger count would otherwise wrap at 2^32).
func probeKeyCount(n int) (uint32, error) {
	if n < 0 || n > maxProbeKeys {
		return 0, errorf(CodeInvalidArgument, "StoreProbe: %d keys exceed the probe's limit of %d keys",
			n, maxProbeKeys)
	}
	return uint32(n), nil
}

// StoreProbe returns the index of the first of keys (a request's candidate
// keys, longest prefix first) that the attached store holds, or -1 when none
// does (swa_cache_store_probe; experimental in the C API). A store error for
// a key before the first present one is returned, naming the key's index.
// At most 4096 keys (INVALID_ARGUMENT past that, the store not asked).
// Thread-safe. The keys are copied to C memory for the call and not kept.
func (c *Cache) StoreProbe(keys [][]byte) (int, error) {
	cp, err := c.s.acquire()
	if err != nil {
		return -1, err
	}
	defer c.s.release()
	count, err := probeKeyCount(len(keys))
	if err != nil {
		return -1, err
	}
	n := len(keys)
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	// One C block: the pointer array, the lengths, then the key bytes (no Go
	// pointer is handed to C).
	ptrBytes := C.size_t(n+1) * C.size_t(unsafe.Sizeof(uintptr(0)))
	lenBytes := C.size_t(n+1) * C.size_t(unsafe.Sizeof(C.size_t(0)))
	block := C.malloc(ptrBytes + lenBytes + C.size_t(total) + 1)
	if block == nil {
		return -1, &Error{Code: CodeResourceExhausted, Message: "StoreProbe: cannot allocate the key block"}
	}
	defer C.free(block)
	ptrs := unsafe.Slice((**C.uint8_t)(block), n+1)
	lens := unsafe.Slice((*C.size_t)(unsafe.Add(block, ptrBytes)), n+1)
	data := unsafe.Add(block, ptrBytes+lenBytes)
	off := 0
	for i, k := range keys {
		if len(k) == 0 {
			ptrs[i] = (*C.uint8_t)(data) // a valid pointer; the library names the length
		} else {
			dst := unsafe.Add(data, off)
			copy(unsafe.Slice((*byte)(dst), len(k)), k)
			ptrs[i] = (*C.uint8_t)(dst)
		}
		lens[i] = C.size_t(len(k))
		off += len(k)
	}
	var found C.int32_t = -1
	err = result(C.swago_store_probe(cp, (**C.uint8_t)(block), (*C.size_t)(unsafe.Add(block, ptrBytes)),
		C.uint32_t(count), &found))
	runtime.KeepAlive(c)
	if err != nil {
		return -1, err
	}
	return int(found), nil
}

// BeginReplayExact prepares a slot holding no valid position for an exact
// replay after a prefix hit of hitLen tokens (swa_slot_begin_replay_exact):
// S = L * (W - 1) positions, plus one with needLastOutput, where L is
// slidingLayers (0: the cache's layer count). Returns start = max(0,
// hitLen - S) and n = hitLen - start. Exact when the engine's full-attention
// layers read their cached prefix KV during the replay. Thread-safe.
func (c *Cache) BeginReplayExact(slot uint32, hitLen int32, slidingLayers uint32,
	needLastOutput bool) (start, n int32, err error) {
	p, err := c.s.acquire()
	if err != nil {
		return 0, 0, err
	}
	defer c.s.release()
	last := C.int32_t(0)
	if needLastOutput {
		last = 1
	}
	var a, b C.int32_t
	err = result(C.swago_slot_begin_replay_exact(p, C.uint32_t(slot), C.int32_t(hitLen),
		C.uint32_t(slidingLayers), last, &a, &b))
	runtime.KeepAlive(c)
	return int32(a), int32(b), err
}
