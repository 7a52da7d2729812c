package swacache

// The tiered and Redis Cluster stores from Go.

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
)

func TestTieredStore(t *testing.T) {
	mem, err := NewMemoryStore(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := NewDirectoryStore(DirectoryStoreConfig{Path: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	slow := newMapStore() // A Go store as the slowest tier: its map is the expectation.
	tiered, err := NewTieredStore(mem, dir, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer tiered.Close()
	for name, s := range map[string]*BuiltinStore{"memory": mem, "directory": dir} {
		if err := s.Put([]byte("k"), []byte("v")); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s tier used after the hand-over: %v", name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s Close after the hand-over: %v", name, err)
		}
	}

	// A put reaches the slowest tier.
	blob := bytes.Repeat([]byte{7, 1, 9}, 500)
	if err := tiered.Put([]byte("a"), blob); err != nil {
		t.Fatal(err)
	}
	slow.mu.Lock()
	got := slow.m["a"]
	slow.mu.Unlock()
	if !bytes.Equal(got, blob) {
		t.Fatalf("slowest tier holds %d bytes after Put", len(got))
	}

	// A blob only the slowest tier has is found there and promoted.
	only := []byte("only in the slowest tier")
	slow.mu.Lock()
	slow.m["b"] = only
	slow.mu.Unlock()
	for i := 0; i < 2; i++ {
		if g, err := tiered.Get([]byte("b")); err != nil || !bytes.Equal(g, only) {
			t.Fatalf("Get #%d = %q, %v", i, g, err)
		}
	}
	s0, err := tiered.TierStats(0)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := tiered.TierStats(2)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := tiered.TierStats(1)
	if err != nil {
		t.Fatal(err)
	}
	// The first Get misses tiers 0 and 1 and is answered by tier 2, which
	// promotes the blob into both; the second is answered by tier 0. (Get may
	// ask the library twice per call, sizing its buffer first.)
	if s0.Promotions != 1 || s1.Promotions != 1 || s0.Hits == 0 || s2.Hits == 0 || s0.Misses != s2.Hits ||
		s1.Misses != s0.Misses || s2.BytesRead != s2.Hits*uint64(len(only)) {
		t.Fatalf("tier stats 0 = %+v, 1 = %+v, 2 = %+v", s0, s1, s2)
	}
	if _, err := tiered.TierStats(3); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TierStats(3): %v", err)
	}
	m2, _ := NewMemoryStore(1 << 20)
	defer m2.Close()
	if _, err := m2.TierStats(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TierStats of a memory store: %v", err)
	}
	if err := tiered.Remove([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if ok, err := tiered.Exists([]byte("b")); ok || err != nil {
		t.Fatalf("Exists after Remove = %v, %v", ok, err)
	}
	slow.mu.Lock()
	_, still := slow.m["b"]
	slow.mu.Unlock()
	if still {
		t.Fatal("Remove left the blob in the slowest tier")
	}

	// Attached to a cache, it round-trips a slot; closing the cache releases
	// the Go tier exactly once.
	c, err := NewCache(testConfig(FormatFP32))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.NewPlan()
	a, _ := c.AllocSlot()
	prefill(t, c, p, rand.New(rand.NewSource(3)), &seqState{slot: a, ref: newRefSeq()}, 6)
	if err := c.SetStore(tiered); err != nil {
		t.Fatal(err)
	}
	if _, err := tiered.TierStats(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("TierStats after the cache took it: %v", err)
	}
	if err := c.Save(a, []byte("seq")); err != nil {
		t.Fatal(err)
	}
	b, _ := c.AllocSlot()
	if err := c.Restore(b, []byte("seq")); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.SlotInfo(b); info.WrittenEnd != 6 {
		t.Fatalf("restored %+v", info)
	}
	if n := slow.released.Load(); n != 0 {
		t.Fatalf("Go tier released %d times while in use", n)
	}
	c.Close()
	if n := slow.released.Load(); n != 1 {
		t.Fatalf("Go tier released %d times after the cache closed", n)
	}
}

func TestTieredStoreErrors(t *testing.T) {
	mem, _ := NewMemoryStore(1 << 20)
	defer mem.Close()
	var nilStore *BuiltinStore
	g := newMapStore()
	for name, tiers := range map[string][]Store{
		"no tiers":       nil,
		"nil tier":       {mem, nil},
		"nil builtin":    {nilStore},
		"same tier":      {mem, g, mem},
		"seventeen":      {g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g},
		"closed builtin": {closedMemoryStore(t)},
	} {
		s, err := NewTieredStore(tiers...)
		want := ErrInvalidArgument
		if name == "closed builtin" {
			want = ErrClosed
		}
		if !errors.Is(err, want) || s != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A failed creation leaves every tier with the caller, and releases no Go store.
	if err := mem.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatalf("memory tier after failed creations: %v", err)
	}
	if n := g.released.Load(); n != 0 {
		t.Fatalf("Go store released %d times by failed creations", n)
	}
	// An unattached tiered store closes its tiers: the Go one is released once.
	g2 := newMapStore()
	s, err := NewTieredStore(g2)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	if n := g2.released.Load(); n != 1 {
		t.Fatalf("Go tier released %d times by Close", n)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed tiered store: %v", err)
	}
}

func closedMemoryStore(t *testing.T) *BuiltinStore {
	s, err := NewMemoryStore(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return s
}

// Without a cluster to talk to, the Redis Cluster store is checked at its
// configuration: malformed seeds are refused before any connection, and a
// seed with nothing listening is UNAVAILABLE (UNIMPLEMENTED without hiredis).
func TestRedisClusterStoreConfig(t *testing.T) {
	if _, err := NewRedisClusterStore(RedisClusterStoreConfig{Nodes: "127.0.0.1:1\x00x"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a NUL in Nodes: %v", err)
	}
	if _, err := NewDirectoryStore(DirectoryStoreConfig{Path: t.TempDir() + "\x00/elsewhere"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a NUL in a directory path: %v", err)
	}
	_, err := NewRedisClusterStore(RedisClusterStoreConfig{Nodes: "127.0.0.1:1", TimeoutMs: 200, MaxAttempts: 1})
	if errors.Is(err, ErrUnimplemented) {
		t.Logf("no Redis Cluster store in this build: %v", err)
		return
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cluster seed on port 1: %v", err)
	}
	for _, nodes := range []string{"no-port", "127.0.0.1:", "127.0.0.1:99999", ","} {
		if _, err := NewRedisClusterStore(RedisClusterStoreConfig{Nodes: nodes, TimeoutMs: 200}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("nodes %q: %v", nodes, err)
		}
	}
}
