package swacache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mapStore is a Go map store, as an engine would write one.
type mapStore struct {
	mu       sync.Mutex
	m        map[string][]byte
	released atomic.Int32
}

func newMapStore() *mapStore { return &mapStore{m: map[string][]byte{}} }

func (s *mapStore) Put(key, blob []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(key)] = blob // The binding hands over fresh copies.
	return nil
}

func (s *mapStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[string(key)]
	if !ok {
		return nil, fmt.Errorf("no blob %q: %w", key, ErrNotFound)
	}
	return b, nil
}

func (s *mapStore) Exists(key []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[string(key)]
	return ok, nil
}

func (s *mapStore) Remove(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(key)]; !ok {
		return ErrNotFound
	}
	delete(s.m, string(key))
	return nil
}

func (s *mapStore) Release() { s.released.Add(1) }

// faultStore fails or panics in every call as told.
type faultStore struct {
	err   error
	panic any
	blob  []byte // returned by Get when err and panic are nil
}

func (s *faultStore) do() error {
	if s.panic != nil {
		panic(s.panic)
	}
	return s.err
}
func (s *faultStore) Put(key, blob []byte) error { return s.do() }
func (s *faultStore) Get(key []byte) ([]byte, error) {
	if err := s.do(); err != nil {
		return nil, err
	}
	return s.blob, nil
}
func (s *faultStore) Exists(key []byte) (bool, error) { return false, s.do() }
func (s *faultStore) Remove(key []byte) error         { return s.do() }

// prefill plans and runs one step of n tokens on slot.
func prefill(t testing.TB, c *Cache, p *Plan, r *rand.Rand, st *seqState, n int) {
	t.Helper()
	stepAll(t, c, p, r, []*seqState{st}, []int{n}, false)
	st.next += n
}

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

func TestBuiltinStores(t *testing.T) {
	if _, err := NewMemoryStore(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("zero budget: %v", err)
	}
	mem, err := NewMemoryStore(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := NewDirectoryStore(DirectoryStoreConfig{Path: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirectoryStore(DirectoryStoreConfig{Path: t.TempDir() + "/missing", NoCreate: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing root with NoCreate: %v", err)
	}
	if _, err := NewDirectoryStore(DirectoryStoreConfig{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty path: %v", err)
	}
	for name, s := range map[string]*BuiltinStore{"memory": mem, "directory": dir} {
		blob := bytes.Repeat([]byte{1, 2, 3}, 1000)
		if err := s.Put([]byte("key"), blob); err != nil {
			t.Fatalf("%s Put: %v", name, err)
		}
		got, err := s.Get([]byte("key"))
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("%s Get: %d bytes, %v", name, len(got), err)
		}
		if ok, err := s.Exists([]byte("key")); !ok || err != nil {
			t.Fatalf("%s Exists: %v %v", name, ok, err)
		}
		if err := s.Remove([]byte("key")); err != nil {
			t.Fatalf("%s Remove: %v", name, err)
		}
		if _, err := s.Get([]byte("key")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s Get after Remove: %v", name, err)
		}
		if err := s.Remove([]byte("key")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s second Remove: %v", name, err)
		}
	}
	st, err := mem.MemoryStats()
	if err != nil || st.BudgetBytes != 1<<20 || st.Puts != 1 || st.Hits < 1 || st.Misses != 1 || st.Entries != 0 {
		t.Fatalf("MemoryStats = %+v, %v", st, err)
	}
	if _, err := dir.MemoryStats(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("MemoryStats of a directory store: %v", err)
	}

	// Attached, each store round-trips a slot; the Go value is then closed.
	for name, s := range map[string]*BuiltinStore{"memory": mem, "directory": dir} {
		c := newTestCache(t, FormatFP32)
		p, _ := c.NewPlan()
		a, _ := c.AllocSlot()
		prefill(t, c, p, rand.New(rand.NewSource(1)), &seqState{slot: a, ref: newRefSeq()}, 5)
		if err := c.SetStore(s); err != nil {
			t.Fatalf("%s SetStore: %v", name, err)
		}
		if err := s.Put([]byte("k"), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s used after the cache took it: %v", name, err)
		}
		if err := c.SetStore(s); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s attached twice: %v", name, err)
		}
		if err := c.Save(a, []byte("seq")); err != nil {
			t.Fatalf("%s Save: %v", name, err)
		}
		b, _ := c.AllocSlot()
		if err := c.Restore(b, []byte("seq")); err != nil {
			t.Fatalf("%s Restore: %v", name, err)
		}
		if info, _ := c.SlotInfo(b); info.WrittenEnd != 5 {
			t.Fatalf("%s restored %+v", name, info)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	var nilStore *BuiltinStore
	if err := newTestCache(t, FormatFP32).SetStore(nilStore); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil *BuiltinStore: %v", err)
	}

	// Closed before use.
	m2, _ := NewMemoryStore(1 << 20)
	m2.Close()
	m2.Close()
	if _, err := m2.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed store: %v", err)
	}
	if _, err := m2.Exists([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Exists on a closed store: %v", err)
	}
	if err := m2.Remove([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Remove on a closed store: %v", err)
	}
	if _, err := m2.MemoryStats(); !errors.Is(err, ErrClosed) {
		t.Fatalf("MemoryStats on a closed store: %v", err)
	}

	// Redis: nothing listens on port 1.
	_, err = NewRedisStore(RedisStoreConfig{Port: 1, TimeoutMs: 200})
	if errors.Is(err, ErrUnimplemented) {
		t.Logf("no Redis store in this build: %v", err)
		return
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("redis on port 1: %v", err)
	}
	testRedis(t)
}

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

// testRedis runs a real redis-server on a free loopback port, if installed.
func testRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Log("SKIP redis round trip: redis-server is not on PATH")
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var s *BuiltinStore
	for i := 0; i < 100; i++ {
		if s, err = NewRedisStore(RedisStoreConfig{Host: "127.0.0.1", Port: uint32(port), TimeoutMs: 1000}); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	defer s.Close()
	if err := s.Put([]byte("k"), []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get([]byte("k")); err != nil || string(got) != "blob" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := s.Remove([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists([]byte("k")); ok || err != nil {
		t.Fatalf("Exists after Remove = %v, %v", ok, err)
	}
	t.Logf("redis-server round trip on port %d", port)
}
