package swacache

// Authenticated blobs and tenant namespaces (issue 33): Config.StoreSecret
// and Config.StoreNamespace, two caches sharing one directory store.

import (
	"errors"
	"testing"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// A cache on the directory `dir` with slot 0 saved-able: ValidStart 5.
func securityCache(t *testing.T, dir string, secret, namespace []byte) (*Cache, uint32, uint32) {
	t.Helper()
	cfg := testConfig(FormatFP32)
	cfg.StoreSecret, cfg.StoreNamespace = secret, namespace
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := NewDirectoryStore(DirectoryStoreConfig{Path: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetStore(s); err != nil {
		t.Fatal(err)
	}
	a, _ := c.AllocSlot()
	b, _ := c.AllocSlot()
	if err := c.SetValidStart(a, 5); err != nil {
		t.Fatal(err)
	}
	return c, a, b
}

func validStart(t *testing.T, c *Cache, slot uint32) int32 {
	t.Helper()
	info, err := c.SlotInfo(slot)
	if err != nil {
		t.Fatal(err)
	}
	return info.ValidStart
}

func TestTaggedBlobsNeedTheSameSecret(t *testing.T) {
	dir := t.TempDir()
	tagged, a, b := securityCache(t, dir, testSecret, nil)
	if err := tagged.Save(a, []byte("req")); err != nil {
		t.Fatal(err)
	}
	if err := tagged.Restore(b, []byte("req")); err != nil || validStart(t, tagged, b) != 5 {
		t.Fatalf("same secret: %v, ValidStart %d", err, validStart(t, tagged, b))
	}
	for _, secret := range [][]byte{nil, []byte("another secret of 32 bytes......")} {
		other, _, d := securityCache(t, dir, secret, nil)
		if err := other.Restore(d, []byte("req")); !errors.Is(err, ErrDataLoss) {
			t.Fatalf("secret %q: %v, want DATA_LOSS", secret, err)
		}
		if validStart(t, other, d) != 0 {
			t.Fatalf("secret %q: the refused restore changed the slot", secret)
		}
		if secret == nil {
			if err := other.Save(d, []byte("plain")); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, _ := tagged.AllocSlot()
	if err := tagged.Restore(c, []byte("plain")); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("untagged blob with a secret: %v, want DATA_LOSS", err)
	}
	cfg := testConfig(FormatFP32)
	cfg.StoreSecret = []byte("short")
	if _, err := NewCache(cfg); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("5-byte secret: %v", err)
	}
}

func TestNamespacesIsolateEqualKeys(t *testing.T) {
	dir := t.TempDir()
	ca, a0, a1 := securityCache(t, dir, nil, []byte("tenant-a"))
	cb, b0, b1 := securityCache(t, dir, testSecret, []byte("tenant-b"))
	key := []byte("shared")
	if err := ca.Save(a0, key); err != nil {
		t.Fatal(err)
	}
	if ok, err := cb.StoreExists(key); ok || err != nil {
		t.Fatalf("b sees a's blob: %v %v", ok, err)
	}
	if i, err := cb.StoreProbe([][]byte{[]byte("x"), key}); i != -1 || err != nil {
		t.Fatalf("b's probe: %d %v", i, err)
	}
	if i, err := ca.StoreProbe([][]byte{[]byte("x"), key}); i != 1 || err != nil {
		t.Fatalf("a's probe: %d %v", i, err)
	}
	if err := cb.Restore(b1, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b restores a's blob: %v", err)
	}
	if err := cb.StoreRemove(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b removes a's blob: %v", err)
	}
	if err := cb.SetValidStart(b0, 7); err != nil {
		t.Fatal(err)
	}
	if err := cb.Save(b0, key); err != nil {
		t.Fatal(err)
	}
	if err := ca.Restore(a1, key); err != nil || validStart(t, ca, a1) != 5 {
		t.Fatalf("a's own blob: %v, ValidStart %d", err, validStart(t, ca, a1))
	}
	if err := cb.Restore(b1, key); err != nil || validStart(t, cb, b1) != 7 {
		t.Fatalf("b's own blob: %v, ValidStart %d", err, validStart(t, cb, b1))
	}
}
