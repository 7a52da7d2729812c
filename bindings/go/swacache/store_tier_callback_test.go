package swacache

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A Go store that is a tier of a tiered store attached to a cache is that
// cache's callback too: Close from inside it is refused like Close from a
// directly attached Go store. Before the fix the tier's handle was not bound
// to the cache, so the Close waited for the Save running the callback: a
// deadlock. Nested tiered stores bind their Go tiers the same way.
func TestCloseFromInsideATieredStoresGoTierIsRefused(t *testing.T) {
	for _, nested := range []bool{false, true} {
		name := "tier"
		if nested {
			name = "nested tier"
		}
		t.Run(name, func(t *testing.T) {
			c, err := NewCache(testConfig(FormatFP32))
			if err != nil {
				t.Fatal(err)
			}
			slot, _ := c.AllocSlot()
			inner := &closingStore{mapStore: mapStore{m: map[string][]byte{}}, c: c}
			mem, err := NewMemoryStore(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			tiered, err := NewTieredStore(mem, inner)
			if err != nil {
				t.Fatal(err)
			}
			if nested {
				if tiered, err = NewTieredStore(tiered); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetStore(tiered); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.Save(slot, []byte("k")) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Save: %v", err)
				}
			case <-time.After(30 * time.Second):
				// The Save and the Close stay blocked; the cache is leaked.
				t.Fatal("Save hung: Close inside the Go tier's callback waited for it")
			}
			if !errors.Is(inner.err, ErrFailedPrecondition) || !strings.Contains(inner.err.Error(), "inside a store callback") {
				t.Errorf("Close inside the tier: got %v, want FAILED_PRECONDITION", inner.err)
			}
			if len(inner.m) != 1 {
				t.Errorf("the Go tier holds %d blobs, want 1", len(inner.m))
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
