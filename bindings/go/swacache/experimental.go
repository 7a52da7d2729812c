//go:build swacache_experimental

package swacache

// The experimental part of the C API, compiled only with the build tag
// swacache_experimental (go build -tags swacache_experimental): the header
// declares it only under SWACACHE_EXPERIMENTAL, which this file's preamble
// defines. It may change in any 0.x minor release (docs/api.md).

/*
#define SWACACHE_EXPERIMENTAL 1
#include "capi.h"

static swago_ret swago_slot_set_lengths(swa_cache_t* c, const uint32_t* slots,
                                        const int32_t* written_end, const int32_t* valid_start,
                                        size_t n) {
  return swago_r(swa_slot_set_lengths(c, slots, written_end, valid_start, n));
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Experimental is true in a build with the swacache_experimental tag.
const Experimental = true

// SetSlotLengths reports the lengths of slots a graph decode advanced
// (swa_slot_set_lengths; experimental): writtenEnd[i] is one past the last
// valid position of slots[i]; validStart is nil (keep each slot's) or one
// entry per slot. On a slot that no graph advanced it may only rewind.
// All-or-nothing. The lengths of the three slices are checked in Go.
// Thread-safe.
func (c *Cache) SetSlotLengths(slots []uint32, writtenEnd, validStart []int32) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	if len(writtenEnd) != len(slots) {
		return errorf(CodeInvalidArgument, "writtenEnd has %d entries, slots %d", len(writtenEnd), len(slots))
	}
	if validStart != nil && len(validStart) != len(slots) {
		return errorf(CodeInvalidArgument, "validStart has %d entries, slots %d (or nil)", len(validStart), len(slots))
	}
	if len(slots) == 0 {
		return nil
	}
	var vs *C.int32_t
	if validStart != nil {
		vs = (*C.int32_t)(unsafe.Pointer(&validStart[0]))
	}
	err = result(C.swago_slot_set_lengths(cp, (*C.uint32_t)(unsafe.Pointer(&slots[0])),
		(*C.int32_t)(unsafe.Pointer(&writtenEnd[0])), vs, C.size_t(len(slots))))
	runtime.KeepAlive(slots)
	runtime.KeepAlive(writtenEnd)
	runtime.KeepAlive(validStart)
	runtime.KeepAlive(c)
	return err
}
