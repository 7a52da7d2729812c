package swacache

// Go stores bridged through the callback table: round trips, errors, panics,
// release.

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestGoMapStore(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	p, _ := c.NewPlan()
	r := rand.New(rand.NewSource(3))
	if err := c.Save(0, []byte("k")); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("save without a store: %v", err)
	}
	store := newMapStore()
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	a, _ := c.AllocSlot()
	sa := &seqState{slot: a, ref: newRefSeq()}
	prefill(t, c, p, r, sa, 6)
	prefill(t, c, p, r, sa, 3)
	if err := c.Save(a, []byte("seq-a")); err != nil {
		t.Fatal(err)
	}
	lay, _ := c.Layout()
	if len(store.m) != 1 {
		t.Fatalf("%d blobs", len(store.m))
	}
	for k, v := range store.m {
		if want := fmt.Sprintf("%016x:seq-a", lay.Fingerprint); k != want || uint64(len(v)) != 64+lay.StoredBytes {
			t.Fatalf("blob %q (%d bytes), want key %q", k, len(v), want)
		}
	}
	// Restore into another slot: same metadata, and the next step of both
	// sequences matches the reference (the restored one shares a's history).
	b, _ := c.AllocSlot()
	if err := c.Restore(b, []byte("seq-a")); err != nil {
		t.Fatal(err)
	}
	ia, _ := c.SlotInfo(a)
	ib, _ := c.SlotInfo(b)
	if ia.WrittenEnd != ib.WrittenEnd || ib.WrittenEnd != 9 || ia.ValidStart != ib.ValidStart {
		t.Fatalf("restored %+v from %+v", ib, ia)
	}
	sb := &seqState{slot: b, ref: newRefSeq(), next: sa.next}
	for l := 0; l < tLayers; l++ {
		for pos, k := range sa.ref.k[l] {
			sb.ref.k[l][pos], sb.ref.v[l][pos] = k, sa.ref.v[l][pos]
		}
	}
	if worst := stepAll(t, c, p, r, []*seqState{sa, sb}, []int{tN + 1, tN + 1}, false); worst > 1e-5 {
		t.Fatalf("step after restore: error %.3g", worst)
	}

	if err := c.Restore(b, []byte("missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of a missing key: %v", err)
	}
	if err := c.Save(a, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key: %v", err)
	}
	if err := c.Save(a, make([]byte, 1025)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long key: %v", err)
	}
	if err := c.Save(99, []byte("k")); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("slot past the pool: %v", err)
	}
	key := []byte("seq-a") // The library adds the fingerprint prefix.
	if ok, err := c.StoreExists(key); err != nil || !ok {
		t.Fatalf("StoreExists = %v, %v", ok, err)
	}
	if err := c.StoreRemove(key); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.StoreExists(key); err != nil || ok {
		t.Fatalf("StoreExists after remove = %v, %v", ok, err)
	}
	if err := c.StoreRemove(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}

	// Corrupt blob: DATA_LOSS, slot unchanged.
	if err := c.Save(a, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for k := range store.m {
		store.m[k][100] ^= 1
	}
	before, _ := c.SlotInfo(b)
	if err := c.Restore(b, []byte("x")); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("corrupt blob: %v", err)
	}
	if after, _ := c.SlotInfo(b); after != before {
		t.Fatalf("failed restore changed the slot: %+v -> %+v", before, after)
	}

	// Release: exactly once on replace, never for a store never attached.
	if err := c.SetStore(newMapStore()); err != nil {
		t.Fatal(err)
	}
	if n := store.released.Load(); n != 1 {
		t.Fatalf("released %d times after replace", n)
	}
	second := newMapStore()
	if err := c.SetStore(second); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStore(nil); err != nil { // detach
		t.Fatal(err)
	}
	if n := second.released.Load(); n != 1 {
		t.Fatalf("released %d times after detach", n)
	}
	third := newMapStore()
	c.SetStore(third)
	c.Close()
	if n := third.released.Load(); n != 1 || store.released.Load() != 1 {
		t.Fatalf("released %d times after Close", n)
	}
}

func TestFailingAndPanickingStores(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	slot, _ := c.AllocSlot()
	cases := []struct {
		name  string
		store *faultStore
		code  Code
		text  string
	}{
		{"status", &faultStore{err: &Error{Code: CodeUnavailable, Message: "backend down"}}, CodeUnavailable, "backend down"},
		{"wrapped sentinel", &faultStore{err: fmt.Errorf("quota: %w", ErrResourceExhausted)}, CodeResourceExhausted, "quota"},
		{"plain error", &faultStore{err: errors.New("disk on fire")}, CodeUnknown, "disk on fire"},
		{"panic", &faultStore{panic: "store exploded"}, CodeInternal, "store exploded"},
		{"panic error", &faultStore{panic: errors.New("nil map")}, CodeInternal, "nil map"},
	}
	for _, tc := range cases {
		if err := c.SetStore(tc.store); err != nil {
			t.Fatal(err)
		}
		calls := map[string]error{
			"save":    c.Save(slot, []byte("k")),
			"restore": c.Restore(slot, []byte("k")),
			"remove":  c.StoreRemove([]byte("k")),
		}
		_, calls["exists"] = c.StoreExists([]byte("k"))
		for call, err := range calls {
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.text) {
				t.Errorf("%s %s: got %v, want %v with %q", tc.name, call, err, tc.code, tc.text)
			}
		}
	}
	// A blob of the wrong size and an OK without data are corruption, not a crash.
	for _, blob := range [][]byte{[]byte("short"), make([]byte, 4096)} {
		c.SetStore(&faultStore{blob: blob})
		if err := c.Restore(slot, []byte("k")); !errors.Is(err, ErrDataLoss) {
			t.Errorf("restore of a %d-byte blob: %v", len(blob), err)
		}
	}
}
