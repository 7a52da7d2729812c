package swacache

/*
#include "capi.h"

// The exported Go trampolines (trampolines.go).
extern int swagoStorePut(uintptr_t h, uint8_t* key, size_t key_len, swa_iov_t* iov, size_t n_iov,
                         char* msg, size_t msg_cap);
extern int swagoStoreGet(uintptr_t h, uint8_t* key, size_t key_len, swa_iov_t* iov, size_t n_iov,
                         uint64_t* blob_size, char* msg, size_t msg_cap);
extern int swagoStoreExists(uintptr_t h, uint8_t* key, size_t key_len, uint32_t* exists,
                            char* msg, size_t msg_cap);
extern int swagoStoreRemove(uintptr_t h, uint8_t* key, size_t key_len, char* msg, size_t msg_cap);
extern void swagoStoreRelease(uintptr_t h);

// C entries of the table, with the header's exact signatures.
static swa_status_t swago_put(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                              size_t n_iov, char* msg, size_t msg_cap) {
  return (swa_status_t)swagoStorePut((uintptr_t)ud, (uint8_t*)key, key_len, (swa_iov_t*)iov, n_iov,
                                     msg, msg_cap);
}
static swa_status_t swago_get(void* ud, const uint8_t* key, size_t key_len, const swa_iov_t* iov,
                              size_t n_iov, uint64_t* blob_size, char* msg, size_t msg_cap) {
  return (swa_status_t)swagoStoreGet((uintptr_t)ud, (uint8_t*)key, key_len, (swa_iov_t*)iov, n_iov,
                                     blob_size, msg, msg_cap);
}
static swa_status_t swago_exists(void* ud, const uint8_t* key, size_t key_len, uint32_t* exists,
                                 char* msg, size_t msg_cap) {
  return (swa_status_t)swagoStoreExists((uintptr_t)ud, (uint8_t*)key, key_len, exists, msg, msg_cap);
}
static swa_status_t swago_remove(void* ud, const uint8_t* key, size_t key_len, char* msg,
                                 size_t msg_cap) {
  return (swa_status_t)swagoStoreRemove((uintptr_t)ud, (uint8_t*)key, key_len, msg, msg_cap);
}
static void swago_release(void* ud) { swagoStoreRelease((uintptr_t)ud); }

// The callback table of a Go store: its user_data is the cgo.Handle value.
static void swago_go_table(uintptr_t h, swa_kv_store_t* t) {
  swa_kv_store_init(t);
  t->user_data = (void*)h;
  t->put = swago_put;
  t->get = swago_get;
  t->exists = swago_exists;
  t->remove = swago_remove;
  t->release = swago_release;
}

// Attach a Go store.
static swago_ret swago_set_go_store(swa_cache_t* c, uintptr_t h) {
  swa_kv_store_t t;
  swago_go_table(h, &t);
  return swago_r(swa_cache_set_store(c, &t));
}
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// Store is an external KV store implemented in Go, bridged to the library's
// callback table (swa_kv_store_t) by Cache.SetStore. Keys arrive prefixed
// with the cache's layout fingerprint ("0123456789abcdef:" + engine key).
//
// The key and blob slices passed in are fresh Go copies of the library's
// borrowed buffers: a store may keep them. Each call runs on a goroutine of
// its own while the goroutine that called Save, Restore, StoreExists or
// StoreRemove waits for it (so that a panic(nil) or runtime.Goexit in it is
// reported as INTERNAL rather than lost or hung), and concurrently when those
// are called from several goroutines, so an implementation must be safe for
// concurrent use. A callback may call its cache (a Close of it is refused
// with FAILED_PRECONDITION; any call during another goroutine's pending Close
// gets ErrClosed). A returned *Error keeps
// its code (wrap a sentinel, e.g. fmt.Errorf("...: %w", ErrNotFound), or
// return one); any other error becomes UNKNOWN, and a panic becomes INTERNAL
// with the panic text, in both cases with the text as the library's message.
type Store interface {
	// Put stores blob under key, replacing any blob there; all-or-nothing
	// for readers.
	Put(key, blob []byte) error
	// Get returns the blob under key, or an error matching ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Exists reports whether a blob is stored under key.
	Exists(key []byte) (bool, error)
	// Remove deletes the blob under key, or returns an error matching
	// ErrNotFound when there is none.
	Remove(key []byte) error
}

// StoreReleaser is an optional interface of a Store: Release is called once,
// after the cgo.Handle is deleted, when the library drops the store (it was
// replaced, detached, or its cache closed). It may run on any goroutine.
type StoreReleaser interface {
	Release()
}

// SetStore attaches a store to the cache (swa_cache_set_store), replacing
// (and releasing) the current one; nil detaches it. A *BuiltinStore is handed
// over as the library's own table (the cache then owns and frees it, and the
// BuiltinStore becomes closed); any other Store is bridged through a
// cgo.Handle, deleted exactly once when the library releases the store.
// Saves and restores already running keep the store they started with.
// Thread-safe.
func (c *Cache) SetStore(s Store) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	defer runtime.KeepAlive(c)
	switch st := s.(type) {
	case nil:
		return result(C.swago_set_store(cp, nil))
	case *BuiltinStore:
		if st == nil {
			return errorf(CodeInvalidArgument, "store is a nil *BuiltinStore")
		}
		return st.attach(cp, c.s)
	}
	h := cgo.NewHandle(&boundStore{s: s, cs: c.s})
	if err := result(C.swago_set_go_store(cp, C.uintptr_t(h))); err != nil {
		h.Delete() // On failure the library does not take ownership.
		return err
	}
	return nil
}

func keyPtr(key []byte) *C.uint8_t {
	if len(key) == 0 {
		return nil // The library names the bad key length.
	}
	return (*C.uint8_t)(unsafe.Pointer(&key[0]))
}

// Save persists the stored region of an allocated slot under key
// (swa_slot_save). Call it between steps. FAILED_PRECONDITION without a store
// or for a slot that is not allocated or is being restored. Thread-safe; no
// step may write the slot during the call. key is not kept.
func (c *Cache) Save(slot uint32, key []byte) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_save(cp, C.uint32_t(slot), keyPtr(key), C.size_t(len(key))))
	runtime.KeepAlive(key)
	runtime.KeepAlive(c)
	return err
}

// Restore overwrites an allocated slot's stored region, WrittenEnd and
// ValidStart from the blob under key, verified in full first
// (swa_slot_restore). NOT_FOUND, DATA_LOSS and FAILED_PRECONDITION all mean
// "recompute"; on any failure the slot is unchanged. Thread-safe; no step may
// use the slot during the call. key is not kept.
func (c *Cache) Restore(slot uint32, key []byte) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_slot_restore(cp, C.uint32_t(slot), keyPtr(key), C.size_t(len(key))))
	runtime.KeepAlive(key)
	runtime.KeepAlive(c)
	return err
}

// StoreExists asks the attached store whether a blob is stored under key
// (swa_cache_store_exists; experimental in the C API). Thread-safe.
func (c *Cache) StoreExists(key []byte) (bool, error) {
	cp, err := c.s.acquire()
	if err != nil {
		return false, err
	}
	defer c.s.release()
	var e C.uint32_t
	err = result(C.swago_store_exists(cp, keyPtr(key), C.size_t(len(key)), &e))
	runtime.KeepAlive(key)
	runtime.KeepAlive(c)
	return e != 0, err
}

// StoreRemove deletes the blob under key from the attached store
// (swa_cache_store_remove; experimental in the C API). NOT_FOUND when there
// is none. Thread-safe.
func (c *Cache) StoreRemove(key []byte) error {
	cp, err := c.s.acquire()
	if err != nil {
		return err
	}
	defer c.s.release()
	err = result(C.swago_store_remove(cp, keyPtr(key), C.size_t(len(key))))
	runtime.KeepAlive(key)
	runtime.KeepAlive(c)
	return err
}

// goTable writes into *t the callback table of a Go store bridged through
// the handle h (used for the tiers of a tiered store).
func goTable(h cgo.Handle, t *C.swa_kv_store_t) { C.swago_go_table(C.uintptr_t(h), t) }
