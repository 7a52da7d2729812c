package swacache

// Prefix reuse (issue 32) through the Go binding: checkpoints, the probe, the
// exact replay span.

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
)

func TestCheckpointAndProbe(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	p, _ := c.NewPlan()
	r := rand.New(rand.NewSource(32))
	store := newMapStore()
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	a, _ := c.AllocSlot()
	sa := &seqState{slot: a, ref: newRefSeq()}
	prefill(t, c, p, r, sa, 6)
	prefill(t, c, p, r, sa, 6)
	// R = W + N + 1 = 11: a checkpoint may lag WrittenEnd 12 by R - W + 1 = 4.
	lo, hi, err := c.CheckpointRange(a)
	if err != nil || lo != 8 || hi != 12 {
		t.Fatalf("CheckpointRange = %d, %d, %v; want 8, 12", lo, hi, err)
	}
	if err := c.SaveAt(a, 10, []byte("ck-10")); err != nil {
		t.Fatal(err)
	}
	err = c.SaveAt(a, 7, []byte("ck-7"))
	if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "8 ... 12") {
		t.Fatalf("SaveAt(7) = %v; want OUT_OF_RANGE naming 8 ... 12", err)
	}
	if len(store.m) != 1 {
		t.Fatalf("%d blobs after a refused checkpoint", len(store.m))
	}
	b, _ := c.AllocSlot()
	if err := c.Restore(b, []byte("ck-10")); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.SlotInfo(b); info.WrittenEnd != 10 || info.ValidStart != 0 {
		t.Fatalf("restored checkpoint: %+v", info)
	}
	for _, tc := range []struct {
		keys []string
		want int
	}{
		{[]string{"ck-12", "ck-10", "ck-5"}, 1},
		{[]string{"ck-10"}, 0},
		{[]string{"x", "y"}, -1},
		{nil, -1},
	} {
		keys := make([][]byte, len(tc.keys))
		for i, k := range tc.keys {
			keys[i] = []byte(k)
		}
		got, err := c.StoreProbe(keys)
		if err != nil || got != tc.want {
			t.Fatalf("StoreProbe(%q) = %d, %v; want %d", tc.keys, got, err, tc.want)
		}
	}
	if _, err := c.StoreProbe([][]byte{[]byte("a"), {}}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "keys[1]") {
		t.Fatalf("StoreProbe with an empty key: %v", err)
	}
	// A failing store: its error, not -1.
	if err := c.SetStore(&faultStore{err: errors.New("disk on fire")}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.StoreProbe([][]byte{[]byte("ck-10")}); err == nil ||
		!strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("StoreProbe on a failing store = %d, %v", got, err)
	}
}

func TestBeginReplayExact(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	s, _ := c.AllocSlot()
	for _, tc := range []struct {
		layers       uint32
		last         bool
		start, count int32
	}{
		{0, false, 16, 14}, // the cache's 2 layers: 2 * (8 - 1)
		{0, true, 15, 15},
		{3, false, 9, 21},
		{5, true, 0, 30},
	} {
		if err := c.ResetSlot(s); err != nil {
			t.Fatal(err)
		}
		start, n, err := c.BeginReplayExact(s, 30, tc.layers, tc.last)
		if err != nil || start != tc.start || n != tc.count {
			t.Fatalf("BeginReplayExact(30, %d, %v) = %d, %d, %v; want %d, %d", tc.layers, tc.last,
				start, n, err, tc.start, tc.count)
		}
	}
	if _, _, err := c.BeginReplayExact(s, -1, 0, false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative hit: %v", err)
	}
}
