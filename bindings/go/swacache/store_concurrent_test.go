package swacache

// Saves and restores from many goroutines while another plans and steps.

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
)

func TestConcurrentSaveRestoreWhilePlanning(t *testing.T) {
	cfg := testConfig(FormatFP32)
	cfg.MaxSlots = 32
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := newMapStore()
	if err := c.SetStore(store); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	// Each worker owns two slots: a prefilled one it saves, one it restores into.
	type pair struct{ a, b uint32 }
	pairs := make([]pair, workers)
	{
		p, _ := c.NewPlan()
		r := rand.New(rand.NewSource(5))
		for w := range pairs {
			a, _ := c.AllocSlot()
			b, err := c.AllocSlot()
			if err != nil {
				t.Fatal(err)
			}
			pairs[w] = pair{a, b}
			prefill(t, c, p, r, &seqState{slot: a, ref: newRefSeq()}, 1+w%5)
		}
		p.Close()
	}
	stop := make(chan struct{})
	var stepper sync.WaitGroup
	stepper.Add(1)
	var steps atomic.Int32
	// One goroutine plans and steps two sequences of its own slots.
	go func() {
		defer stepper.Done()
		p, err := c.NewPlan()
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Close()
		r := rand.New(rand.NewSource(11))
		var seqs []*seqState
		for i := 0; i < 2; i++ {
			s, _ := c.AllocSlot()
			seqs = append(seqs, &seqState{slot: s, ref: newRefSeq()})
		}
		for ; ; steps.Add(1) {
			select {
			case <-stop:
				return
			default:
			}
			if worst := stepAll(t, c, p, r, seqs, []int{tN + 1, 2}, false); worst > 1e-5 {
				t.Errorf("step %d: error %.3g", steps.Load(), worst)
				return
			}
			for _, s := range seqs {
				s.next += 2
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a, b := pairs[w].a, pairs[w].b
			key := []byte(fmt.Sprintf("worker-%d", w))
			// At least 25 rounds, and until the stepper has run a few steps.
			for i := 0; i < 25 || (steps.Load() < 10 && i < 100000); i++ {
				if err := c.Save(a, key); err != nil {
					t.Errorf("worker %d save: %v", w, err)
					return
				}
				if err := c.Restore(b, key); err != nil {
					t.Errorf("worker %d restore: %v", w, err)
					return
				}
				ia, _ := c.SlotInfo(a)
				ib, _ := c.SlotInfo(b)
				if ia.WrittenEnd != ib.WrittenEnd || ib.WrittenEnd != int32(1+w%5) {
					t.Errorf("worker %d: restored %+v from %+v", w, ib, ia)
					return
				}
				if ok, err := c.StoreExists(key); err != nil || !ok {
					t.Errorf("worker %d exists: %v %v", w, ok, err)
				}
				_, _ = c.Stats()
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	stepper.Wait()
	t.Logf("%d steps ran during the saves and restores", steps.Load())
}
