package swacache

// #include "capi.h"
import "C"

import "runtime"

// AllocSlot allocates a free state slot (swa_slot_alloc); it starts with
// WrittenEnd = ValidStart = 0. RESOURCE_EXHAUSTED when every slot is in use.
// Thread-safe (internally locked).
func (c *Cache) AllocSlot() (uint32, error) {
	p, err := c.s.acquire()
	if err != nil {
		return 0, err
	}
	defer c.s.release()
	var slot C.uint32_t
	err = result(C.swago_slot_alloc(p, &slot))
	runtime.KeepAlive(c)
	return uint32(slot), err
}

// FreeSlot returns an allocated slot to the pool (swa_slot_free).
// OUT_OF_RANGE for a bad id, FAILED_PRECONDITION for a slot that is not
// allocated or is being saved/restored. Thread-safe; the caller must not free
// a slot that a step in flight uses.
func (c *Cache) FreeSlot(slot uint32) error {
	p, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_free(p, C.uint32_t(slot)))
	runtime.KeepAlive(c)
	return err
}

// ResetSlot sets an allocated slot's WrittenEnd and ValidStart to 0 for
// recompute (swa_slot_reset). Thread-safe.
func (c *Cache) ResetSlot(slot uint32) error {
	p, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_reset(p, C.uint32_t(slot)))
	runtime.KeepAlive(c)
	return err
}

// CopySlot forks a sequence: every byte and the metadata of src into dst
// (swa_slot_copy). Thread-safe with respect to the slot table; no step may
// run on either slot at the same time.
func (c *Cache) CopySlot(src, dst uint32) error {
	p, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_copy(p, C.uint32_t(src), C.uint32_t(dst)))
	runtime.KeepAlive(c)
	return err
}

// SlotInfo reads a slot's state (swa_slot_info); a free slot reports
// Allocated = false. Thread-safe.
func (c *Cache) SlotInfo(slot uint32) (SlotInfo, error) {
	p, err := c.s.acquire()
	if err != nil {
		return SlotInfo{}, err
	}
	defer c.s.release()
	var o C.swa_slot_info_t
	o.struct_size = C.sizeof_swa_slot_info_t
	err = result(C.swago_slot_info(p, C.uint32_t(slot), &o))
	runtime.KeepAlive(c)
	if err != nil {
		return SlotInfo{}, err
	}
	return SlotInfo{Slot: uint32(o.slot), Allocated: o.allocated != 0,
		WrittenEnd: int32(o.written_end), ValidStart: int32(o.valid_start),
		ByteOffset: uint64(o.byte_offset)}, nil
}

// SetValidStart raises a slot's valid_start (swa_slot_set_valid_start):
// positions below it count as missing. Thread-safe (internally locked).
func (c *Cache) SetValidStart(slot uint32, validStart int32) error {
	p, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_set_valid_start(p, C.uint32_t(slot), C.int32_t(validStart)))
	runtime.KeepAlive(c)
	return err
}

// BeginReplay prepares a slot holding no valid position for bounded replay
// after a prefix hit of hitLen tokens (swa_slot_begin_replay) and returns the
// positions to re-run: start = max(0, hitLen - W) and n = hitLen - start.
// Thread-safe (internally locked).
func (c *Cache) BeginReplay(slot uint32, hitLen int32) (start, n int32, err error) {
	p, err := c.s.acquire()
	if err != nil {
		return 0, 0, err
	}
	defer c.s.release()
	var a, b C.int32_t
	err = result(C.swago_slot_begin_replay(p, C.uint32_t(slot), C.int32_t(hitLen), &a, &b))
	runtime.KeepAlive(c)
	return int32(a), int32(b), err
}
