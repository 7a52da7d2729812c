package swacache

/*
#include <stdlib.h>
#include "swacache.h"
#include "capi.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Cache owns a libswacache cache: layout, slot pool and slot table
// (swa_cache_t). Create one with NewCache and free it with Close.
//
// Threading: the methods documented as thread-safe may be called from many
// goroutines at once. Close waits for calls in flight and then destroys the
// cache and every Plan still open on it; afterwards every method returns an
// error matching ErrClosed. A store callback that calls Close on the cache
// that is calling it gets FAILED_PRECONDITION (Close would wait for itself).
type Cache struct {
	s *cacheState
}

// cacheState is what Close frees; it holds no reference to the Cache so a
// finalizer on the Cache can run.
type cacheState struct {
	// Calls in flight are counted, not read-locked: a call that starts while
	// Close waits fails with ErrClosed at once instead of queueing behind it,
	// so a store callback that calls its cache during a pending Close cannot
	// deadlock.
	mu      sync.Mutex // Guards ptr, calls and closing.
	idle    sync.Cond  // On mu: calls dropped to 0, or a Close finished.
	calls   int        // Calls in flight (acquire ... release).
	closing bool       // A Close waits for the calls or destroys.
	ptr     *C.swa_cache_t
	layers  []LayerDesc // A copy of the configuration's layers, for length checks.
	host    bool        // The pool is host memory (CPU backend): Step may pass slices.

	plansMu sync.Mutex
	plans   map[*planState]struct{}

	// Goroutines running a Go store callback of this cache (callStore), so
	// that Close can refuse to wait for the call that runs its own caller.
	callbacks   atomic.Int32
	callbacksMu sync.Mutex
	callbackIDs map[uint64]int
}

func (s *cacheState) enterCallback(id uint64) {
	s.callbacksMu.Lock()
	if s.callbackIDs == nil {
		s.callbackIDs = make(map[uint64]int)
	}
	s.callbackIDs[id]++
	s.callbacksMu.Unlock()
	s.callbacks.Add(1)
}

func (s *cacheState) exitCallback(id uint64) {
	s.callbacks.Add(-1)
	s.callbacksMu.Lock()
	if s.callbackIDs[id]--; s.callbackIDs[id] == 0 {
		delete(s.callbackIDs, id)
	}
	s.callbacksMu.Unlock()
}

// inCallback reports whether the calling goroutine runs a store callback of
// this cache.
func (s *cacheState) inCallback() bool {
	if s.callbacks.Load() == 0 {
		return false
	}
	id := goid()
	s.callbacksMu.Lock()
	defer s.callbacksMu.Unlock()
	return s.callbackIDs[id] > 0
}

func configToC(cfg *Config, c *C.swa_config_t) (free func()) {
	C.swa_config_init(c)
	c.window = C.uint32_t(cfg.Window)
	c.draft_tokens = C.uint32_t(cfg.DraftTokens)
	c.ring_len = C.uint32_t(cfg.RingLen)
	c.alignment = C.uint32_t(cfg.Alignment)
	c.max_slots = C.uint32_t(cfg.MaxSlots)
	c.backend = C.swa_backend_t(cfg.Backend)
	c.device = C.int32_t(cfg.Device)
	c.scale_mode = C.swa_scale_mode_t(cfg.ScaleMode)
	c.num_threads = C.uint32_t(cfg.NumThreads)
	c.num_layers = C.uint32_t(len(cfg.Layers))
	// The secret and the namespace are copied into C memory (the config is
	// passed to C and must not hold Go pointers); the secret's copy is wiped
	// before it is freed.
	var frees []func()
	if len(cfg.StoreSecret) > 0 {
		n := len(cfg.StoreSecret)
		s := C.CBytes(cfg.StoreSecret)
		c.store_secret = (*C.uint8_t)(s)
		c.store_secret_len = C.size_t(n)
		frees = append(frees, func() {
			b := unsafe.Slice((*byte)(s), n)
			for i := range b {
				b[i] = 0
			}
			C.free(s)
		})
	}
	if len(cfg.StoreNamespace) > 0 {
		s := C.CBytes(cfg.StoreNamespace)
		c.store_namespace = (*C.uint8_t)(s)
		c.store_namespace_len = C.size_t(len(cfg.StoreNamespace))
		frees = append(frees, func() { C.free(s) })
	}
	freeAll := func() {
		for _, f := range frees {
			f()
		}
	}
	if len(cfg.Layers) == 0 {
		return freeAll
	}
	// The layers array lives in C memory: the config struct that points to it
	// is passed to C, and Go memory passed to C must not hold Go pointers.
	n := len(cfg.Layers)
	p := (*C.swa_layer_desc_t)(C.calloc(C.size_t(n), C.size_t(C.sizeof_swa_layer_desc_t)))
	descs := unsafe.Slice(p, n)
	for i := range cfg.Layers {
		cfg.Layers[i].toC(&descs[i])
	}
	c.layers = p
	return func() {
		C.free(unsafe.Pointer(p))
		freeAll()
	}
}

// ComputeLayout returns the layout a configuration would get, validated
// exactly as NewCache does, without creating a cache (swa_layout_compute).
// Thread-safe.
func ComputeLayout(cfg Config) (Layout, error) {
	var c C.swa_config_t
	free := configToC(&cfg, &c)
	defer free()
	var out C.swa_layout_t
	out.struct_size = C.sizeof_swa_layout_t
	if err := result(C.swago_layout_compute(&c, &out)); err != nil {
		return Layout{}, err
	}
	return layoutFromC(&out), nil
}

// NewCache validates cfg and creates a cache with its slot pool
// (swa_cache_create). The caller frees it with Close; a finalizer closes a
// cache that became unreachable unclosed, silently, as a safety net only.
// Thread-safe.
func NewCache(cfg Config) (*Cache, error) {
	var c C.swa_config_t
	free := configToC(&cfg, &c)
	defer free()
	var ptr *C.swa_cache_t
	if err := result(C.swago_cache_create(&c, &ptr)); err != nil {
		return nil, err
	}
	s := &cacheState{ptr: ptr, layers: append([]LayerDesc(nil), cfg.Layers...),
		plans: make(map[*planState]struct{})}
	s.idle.L = &s.mu
	if len(cfg.Layers) > 0 {
		var v C.swa_tensor_view_t
		v.struct_size = C.sizeof_swa_tensor_view_t
		if err := result(C.swago_cache_layer_view(ptr, 0, &v)); err != nil {
			C.swa_cache_destroy(ptr)
			return nil, err
		}
		s.host = v.backend == C.SWA_BACKEND_CPU
	}
	cache := &Cache{s: s}
	runtime.SetFinalizer(cache, func(c *Cache) { c.s.close() })
	return cache, nil
}

// Close destroys every Plan still open on the cache, then the cache and its
// pool (swa_cache_destroy). It waits for calls in flight. Closing twice is a
// no-op and returns nil. From inside a Go store callback of this cache it
// returns FAILED_PRECONDITION and does nothing (a goroutine the callback
// starts is not recognised: its Close waits for the call, which waits for the
// callback). Close on a nil *Cache (NewCache failed) or a zero
// Cache returns an error matching ErrInvalidArgument, as os.File.Close does,
// and does nothing.
func (c *Cache) Close() error {
	if c == nil || c.s == nil {
		return nilHandleError("Cache", "NewCache")
	}
	if c.s.inCallback() {
		return errorf(CodeFailedPrecondition, "Cache.Close from inside a store callback of this "+
			"cache: it would wait for the call that runs the callback; close the cache after "+
			"that call returns")
	}
	c.s.close()
	runtime.SetFinalizer(c, nil)
	return nil
}

func (s *cacheState) close() {
	s.mu.Lock()
	for s.closing { // Another Close runs: wait for it to finish.
		s.idle.Wait()
	}
	if s.ptr == nil {
		s.mu.Unlock()
		return
	}
	s.closing = true // New calls fail from here.
	for s.calls > 0 {
		s.idle.Wait()
	}
	ptr := s.ptr
	s.mu.Unlock()

	s.plansMu.Lock()
	plans := s.plans
	s.plans = nil
	s.plansMu.Unlock()
	for p := range plans {
		p.destroy()
	}
	C.swa_cache_destroy(ptr)

	s.mu.Lock()
	s.ptr = nil
	s.closing = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

// acquire counts a call in flight and returns the cache's pointer, or
// ErrClosed once Close has begun. The caller must call release when the C
// call returned.
func (s *cacheState) acquire() (*C.swa_cache_t, error) {
	if s == nil { // A zero Cache.
		return nil, nilHandleError("Cache", "NewCache")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil || s.closing {
		return nil, closedError("cache")
	}
	s.calls++
	return s.ptr, nil
}

// pin is acquire for Plan.Close: it waits for a running Close instead of
// failing, and reports false when the cache is gone (its plans with it).
//
// From inside a store callback of this cache it does not wait: the Close
// waits for the call running the callback, so the cache outlives it (and
// waiting would deadlock).
func (s *cacheState) pin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.closing && !s.inCallback() {
		s.idle.Wait()
	}
	if s.ptr == nil {
		return false
	}
	s.calls++
	return true
}

func (s *cacheState) release() {
	s.mu.Lock()
	if s.calls--; s.calls == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// Layout reads the whole-slot layout (swa_cache_layout). Thread-safe.
func (c *Cache) Layout() (Layout, error) {
	p, err := c.s.acquire()
	if err != nil {
		return Layout{}, err
	}
	defer c.s.release()
	var out C.swa_layout_t
	out.struct_size = C.sizeof_swa_layout_t
	err = result(C.swago_cache_layout(p, &out))
	runtime.KeepAlive(c)
	if err != nil {
		return Layout{}, err
	}
	return layoutFromC(&out), nil
}

// LayerLayout reads the layout of one layer (swa_cache_layer_layout).
// OUT_OF_RANGE for a layer id past the last layer. Thread-safe.
func (c *Cache) LayerLayout(layer uint32) (LayerLayout, error) {
	p, err := c.s.acquire()
	if err != nil {
		return LayerLayout{}, err
	}
	defer c.s.release()
	var o C.swa_layer_layout_t
	o.struct_size = C.sizeof_swa_layer_layout_t
	err = result(C.swago_cache_layer_layout(p, C.uint32_t(layer), &o))
	runtime.KeepAlive(c)
	if err != nil {
		return LayerLayout{}, err
	}
	return LayerLayout{
		Role: LayerRole(o.role), KVFormat: Format(o.kv_format),
		HeadsPerToken: uint32(o.heads_per_token), VecBytes: uint32(o.vec_bytes),
		BytesPerToken: uint32(o.bytes_per_token), RingLen: uint32(o.ring_len),
		RingOffset: uint64(o.ring_offset), RingBytes: uint64(o.ring_bytes),
		CompressLen: uint32(o.compress_len), CompressEntryBytes: uint32(o.compress_entry_bytes),
		CompressOffset: uint64(o.compress_offset), CompressBytes: uint64(o.compress_bytes),
		CompressKind: CompressKind(o.compress_kind), CompressRatio: uint32(o.compress_ratio),
		CompressHeadDim: uint32(o.compress_head_dim), IndexHeadDim: uint32(o.index_head_dim),
		IndexRowBytes: uint32(o.index_row_bytes), CompressRowValues: uint32(o.compress_row_values),
		IndexOffset: uint64(o.index_offset), IndexBytes: uint64(o.index_bytes),
	}, nil
}

// LayerView returns the tensor view of one layer's ring over all slots
// (swa_cache_layer_view): uint8 [max_slots, R, heads_per_token, vec_bytes].
// The address stays valid until Close. Thread-safe.
func (c *Cache) LayerView(layer uint32) (TensorView, error) {
	p, err := c.s.acquire()
	if err != nil {
		return TensorView{}, err
	}
	defer c.s.release()
	var o C.swa_tensor_view_t
	o.struct_size = C.sizeof_swa_tensor_view_t
	err = result(C.swago_cache_layer_view(p, C.uint32_t(layer), &o))
	runtime.KeepAlive(c)
	if err != nil {
		return TensorView{}, err
	}
	v := TensorView{Data: uintptr(o.data), Backend: Backend(o.backend), Device: int32(o.device),
		NDim: uint32(o.ndim)}
	for i := 0; i < 4; i++ {
		v.Shape[i] = int64(o.shape[i])
		v.Strides[i] = int64(o.strides[i])
	}
	return v, nil
}

// Stats reads the cache's counters (swa_cache_stats). Thread-safe.
func (c *Cache) Stats() (Stats, error) {
	p, err := c.s.acquire()
	if err != nil {
		return Stats{}, err
	}
	defer c.s.release()
	var o C.swa_cache_stats_t
	o.struct_size = C.sizeof_swa_cache_stats_t
	err = result(C.swago_cache_stats(p, &o))
	runtime.KeepAlive(c)
	if err != nil {
		return Stats{}, err
	}
	return Stats{Steps: uint64(o.steps), Tokens: uint64(o.tokens),
		NonfiniteBlock: uint64(o.nonfinite_blocks), SlotsInUse: uint32(o.slots_in_use),
		MaxSlots: uint32(o.max_slots), PoolBytes: uint64(o.pool_bytes)}, nil
}
