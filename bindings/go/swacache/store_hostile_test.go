package swacache

// Ordinary code that must not crash or hang the process (issue 29, items
// 7-9): Close on nil pointers and zero values, panic(nil) and runtime.Goexit
// in a Go store callback.

import (
	"errors"
	"math/rand"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Package-level zero values live outside the heap: runtime.SetFinalizer on
// them is a fatal error that recover cannot stop.
var (
	globalCache Cache
	globalPlan  Plan
	globalStore BuiltinStore
)

func wantNilHandleError(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "nil or zero value") {
		t.Errorf("%s: got %v, want INVALID_ARGUMENT naming a nil or zero value", what, err)
	}
}

func TestCloseOnNilAndZeroValuesReturnsAnError(t *testing.T) {
	// The README's pattern after a failed constructor.
	bad := testConfig(FormatFP32)
	bad.Window = 0
	c, err := NewCache(bad)
	if err == nil || c != nil {
		t.Fatalf("NewCache(window 0) = %v, %v; want nil and an error", c, err)
	}
	wantNilHandleError(t, "nil *Cache", c.Close())
	wantNilHandleError(t, "zero Cache", (&Cache{}).Close())
	wantNilHandleError(t, "package-level zero Cache", globalCache.Close())
	if _, err := globalCache.AllocSlot(); err == nil {
		t.Error("AllocSlot on a zero Cache succeeded")
	}

	live := newTestCache(t, FormatFP32)
	live.Close()
	p, err := live.NewPlan() // fails: the cache is closed
	if err == nil || p != nil {
		t.Fatalf("NewPlan on a closed cache = %v, %v", p, err)
	}
	wantNilHandleError(t, "nil *Plan", p.Close())
	wantNilHandleError(t, "zero Plan", (&Plan{}).Close())
	wantNilHandleError(t, "package-level zero Plan", globalPlan.Close())
	if err := globalPlan.Build([]Seq{{Slot: 0, SeqlenQ: 1, SeqlenK: 1}}); err == nil {
		t.Error("Build on a zero Plan succeeded")
	}

	s, err := NewMemoryStore(0) // a zero budget is refused
	if err == nil || s != nil {
		t.Fatalf("NewMemoryStore(0) = %v, %v", s, err)
	}
	wantNilHandleError(t, "nil *BuiltinStore", s.Close())
	wantNilHandleError(t, "zero BuiltinStore", (&BuiltinStore{}).Close())
	wantNilHandleError(t, "package-level zero BuiltinStore", globalStore.Close())
	if err := s.Put([]byte("k"), []byte("v")); err == nil {
		t.Error("Put on a nil *BuiltinStore succeeded")
	}
	// A live store still closes once, then as a no-op.
	m, err := NewMemoryStore(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// oddStore ends its callbacks the ways a Go program can besides returning.
type oddStore struct {
	mapStore
	how string // "panic(nil)" or "Goexit"
}

func (s *oddStore) misbehave() {
	switch s.how {
	case "panic(nil)":
		panic(nil)
	case "Goexit":
		runtime.Goexit()
	}
}

func (s *oddStore) Put(key, blob []byte) error {
	s.misbehave()
	return s.mapStore.Put(key, blob)
}

func (s *oddStore) Get(key []byte) ([]byte, error) {
	s.misbehave()
	return s.mapStore.Get(key)
}

func (s *oddStore) Exists(key []byte) (bool, error) {
	s.misbehave()
	return s.mapStore.Exists(key)
}

func TestStoreCallbacksThatDoNotReturnAreInternalErrors(t *testing.T) {
	for _, how := range []string{"panic(nil)", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			c := newTestCache(t, FormatFP32)
			p, err := c.NewPlan()
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			slot, _ := c.AllocSlot()
			prefill(t, c, p, rand.New(rand.NewSource(9)), &seqState{slot: slot, ref: newRefSeq()}, 5)
			store := &oddStore{mapStore: mapStore{m: map[string][]byte{}}, how: how}
			if err := c.SetStore(store); err != nil {
				t.Fatal(err)
			}
			calls := map[string]func() error{
				"Save":    func() error { return c.Save(slot, []byte("k")) },
				"Restore": func() error { return c.Restore(slot, []byte("k")) },
				"StoreExists": func() error {
					_, err := c.StoreExists([]byte("k"))
					return err
				},
			}
			for name, call := range calls {
				done := make(chan error, 1)
				go func() { done <- call() }()
				select {
				case err := <-done:
					if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "did not return") {
						t.Errorf("%s: got %v, want INTERNAL saying the callback did not return", name, err)
					}
				case <-time.After(60 * time.Second):
					t.Fatalf("%s hung after the store callback's %s", name, how)
				}
			}
			if len(store.m) != 0 {
				t.Errorf("the store holds %d blobs; the put never completed", len(store.m))
			}
			// Nothing stayed locked: the cache still works and closes.
			if _, err := c.AllocSlot(); err != nil {
				t.Errorf("AllocSlot after the failed calls: %v", err)
			}
			closed := make(chan struct{})
			go func() { c.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(60 * time.Second):
				t.Fatal("Close hung: a failed call kept the cache's lock")
			}
		})
	}
}

// closingStore's Put closes the cache whose Save is calling it.
type closingStore struct {
	mapStore
	c   *Cache
	err error
}

func (s *closingStore) Put(key, blob []byte) error {
	s.err = s.c.Close()
	return s.mapStore.Put(key, blob)
}

func TestCloseFromInsideAStoreCallbackOfTheSameCacheIsRefused(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	slot, _ := c.AllocSlot()
	store := &closingStore{mapStore: mapStore{m: map[string][]byte{}}, c: c}
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Save(slot, []byte("k")) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Save: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Save hung: Close inside its callback waited for it")
	}
	if !errors.Is(store.err, ErrFailedPrecondition) || !strings.Contains(store.err.Error(), "inside a store callback") {
		t.Errorf("Close inside the callback: got %v, want FAILED_PRECONDITION", store.err)
	}
	if len(store.m) != 1 {
		t.Errorf("the store holds %d blobs, want 1", len(store.m))
	}
	// The cache was not closed: it still works, and closes from outside.
	if _, err := c.AllocSlot(); err != nil {
		t.Errorf("AllocSlot after the refused Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := c.AllocSlot(); !errors.Is(err, ErrClosed) {
		t.Errorf("AllocSlot after Close: %v, want ErrClosed", err)
	}
}

// callingStore's Put calls its cache once another goroutine's Close waits
// for the Save that runs the Put.
type callingStore struct {
	mapStore
	c   *Cache
	err error
}

func (s *callingStore) Put(key, blob []byte) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.c.s.mu.Lock()
		closing := s.c.s.closing
		s.c.s.mu.Unlock()
		if closing || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, s.err = s.c.AllocSlot()
	return s.mapStore.Put(key, blob)
}

func TestACallbackCallingItsCacheDuringAPendingCloseDoesNotDeadlock(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	slot, _ := c.AllocSlot()
	store := &callingStore{mapStore: mapStore{m: map[string][]byte{}}, c: c}
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	go func() { saved <- c.Save(slot, []byte("k")) }()
	for { // wait until the Save is inside the library
		c.s.mu.Lock()
		inside := c.s.calls > 0
		c.s.mu.Unlock()
		if inside {
			break
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for i, ch := range []chan error{saved, closed} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", []string{"Save", "Close"}[i], err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("deadlock: the callback's call waited behind the pending Close")
		}
	}
	if !errors.Is(store.err, ErrClosed) {
		t.Errorf("the callback's AllocSlot during the pending Close: %v, want ErrClosed", store.err)
	}
}
