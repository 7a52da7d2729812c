package swacache

// Prefix reuse (issue 32) through the Go binding: checkpoints, the probe, the
// exact replay span.

import (
	"errors"
	"fmt"
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

// The probe's key count is checked against the C API's limit (4096) before
// the conversion to the C call's uint32_t: 2^32 + 1 keys must not become a
// probe of one key.
func TestStoreProbeKeyCountLimit(t *testing.T) {
	var wraps int64 = 1<<32 + 1
	counts := []int64{-1, maxProbeKeys + 1, wraps}
	for _, n := range counts {
		if int64(int(n)) != n {
			continue // past a 32-bit int
		}
		if got, err := probeKeyCount(int(n)); !errors.Is(err, ErrInvalidArgument) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d keys exceed the probe's limit of 4096", n)) {
			t.Fatalf("probeKeyCount(%d) = %d, %v; want INVALID_ARGUMENT naming the count", n, got, err)
		}
	}
	for _, n := range []int{0, 1, maxProbeKeys} {
		if got, err := probeKeyCount(n); err != nil || got != uint32(n) {
			t.Fatalf("probeKeyCount(%d) = %d, %v", n, got, err)
		}
	}

	c := newTestCache(t, FormatFP32)
	// A store that answers every call with an error: the limit is refused
	// before the store is asked; at the limit the store is asked.
	if err := c.SetStore(&faultStore{err: errors.New("store asked")}); err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, maxProbeKeys+1)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("ck-%d", i))
	}
	got, err := c.StoreProbe(keys)
	if got != -1 || !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "StoreProbe: 4097 keys exceed the probe's limit of 4096 keys") {
		t.Fatalf("StoreProbe(4097 keys) = %d, %v; want INVALID_ARGUMENT naming 4097", got, err)
	}
	if got, err := c.StoreProbe(keys[:maxProbeKeys]); got != -1 || err == nil ||
		!strings.Contains(err.Error(), "store asked") {
		t.Fatalf("StoreProbe(4096 keys) on a failing store = %d, %v; want its error", got, err)
	}
	// At the limit on a store that holds none: every key asked, in order.
	store := &askedStore{mapStore: newMapStore()}
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	if got, err := c.StoreProbe(keys[:maxProbeKeys]); got != -1 || err != nil {
		t.Fatalf("StoreProbe(4096 keys) = %d, %v; want -1", got, err)
	}
	if len(store.asked) != maxProbeKeys || !strings.HasSuffix(store.asked[maxProbeKeys-1], ":ck-4095") {
		t.Fatalf("the store was asked %d keys, want 4096 ending with ck-4095", len(store.asked))
	}
}

// askedStore records the keys its Exists is asked.
type askedStore struct {
	*mapStore
	asked []string
}

func (s *askedStore) Exists(key []byte) (bool, error) {
	s.asked = append(s.asked, string(key))
	return s.mapStore.Exists(key)
}
