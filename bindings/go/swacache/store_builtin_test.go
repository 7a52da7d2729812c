package swacache

// The library's own stores (memory, directory, Redis) from Go.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"testing"
	"time"
)

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
