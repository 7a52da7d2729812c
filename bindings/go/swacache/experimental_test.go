//go:build swacache_experimental

package swacache

import (
	"errors"
	"math/rand"
	"testing"
)

func TestExperimentalSetSlotLengths(t *testing.T) {
	if !Experimental {
		t.Fatal("Experimental is false under the swacache_experimental tag")
	}
	c := newTestCache(t, FormatFP32)
	p, _ := c.NewPlan()
	a, _ := c.AllocSlot()
	b, _ := c.AllocSlot()
	r := rand.New(rand.NewSource(9))
	prefill(t, c, p, r, &seqState{slot: a, ref: newRefSeq()}, 6)
	prefill(t, c, p, r, &seqState{slot: b, ref: newRefSeq()}, 5)
	// Rewinding is allowed on slots no graph advanced.
	if err := c.SetSlotLengths([]uint32{a, b}, []int32{4, 5}, nil); err != nil {
		t.Fatal(err)
	}
	if ia, _ := c.SlotInfo(a); ia.WrittenEnd != 4 {
		t.Fatalf("slot a after SetSlotLengths: %+v", ia)
	}
	// Moving past what the ring holds is refused, and changes nothing.
	if err := c.SetSlotLengths([]uint32{a, b}, []int32{3, 9}, nil); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("past the ring: %v", err)
	}
	if ia, _ := c.SlotInfo(a); ia.WrittenEnd != 4 {
		t.Fatalf("a refused call changed slot a: %+v", ia)
	}
	// Lengths are checked in Go.
	if err := c.SetSlotLengths([]uint32{a, b}, []int32{3}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short writtenEnd: %v", err)
	}
	if err := c.SetSlotLengths([]uint32{a}, []int32{3}, []int32{0, 0}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long validStart: %v", err)
	}
	if err := c.SetSlotLengths(nil, nil, nil); err != nil {
		t.Fatalf("no slots: %v", err)
	}
	c.Close()
	if err := c.SetSlotLengths([]uint32{a}, []int32{3}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
