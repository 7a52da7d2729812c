package swacache

import (
	"testing"
	"time"
)

// planClosingStore's Put closes a plan of its cache once another goroutine's
// Close waits for the Save that runs the Put.
type planClosingStore struct {
	mapStore
	c   *Cache
	p   *Plan
	err error
}

func (s *planClosingStore) Put(key, blob []byte) error {
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
	s.err = s.p.Close()
	return s.mapStore.Put(key, blob)
}

// Plan.Close from a store callback while Close of the cache waits for the
// call running that callback: before the fix Plan.Close waited for the
// cache's Close to finish (a deadlock: Close waits for the Save, the Save for
// the callback). Now the plan is destroyed at once (the cache still exists:
// its Close waits for this very call) and Close then finds it gone.
func TestPlanCloseInsideACallbackDuringAPendingCloseDoesNotDeadlock(t *testing.T) {
	c, err := NewCache(testConfig(FormatFP32))
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := c.AllocSlot()
	p, err := c.NewPlan()
	if err != nil {
		t.Fatal(err)
	}
	store := &planClosingStore{mapStore: mapStore{m: map[string][]byte{}}, c: c, p: p}
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
		case <-time.After(30 * time.Second):
			// Everything stays blocked; the cache is leaked.
			t.Fatal("deadlock: Plan.Close in the callback waited for the pending Close")
		}
	}
	if store.err != nil {
		t.Errorf("Plan.Close in the callback: %v", store.err)
	}
	if _, err := p.Info(); err == nil {
		t.Error("the plan still answers after Close")
	}
}
