package swacache

// The exported functions the C callback table of a Go store calls (through
// the static wrappers in store.go). A file with //export may only declare
// in its preamble, so the wrappers live elsewhere.
//
// Every trampoline copies what it needs out of the library's borrowed
// buffers before calling the store, converts the store's error or panic into
// a status and a message, and never lets a panic unwind into C. The store
// runs on a goroutine of its own (callStore): a panic(nil) (which recover
// cannot see before Go 1.21) or a runtime.Goexit (what t.FailNow does) ends
// that goroutine without completing, and the trampoline returns INTERNAL
// instead of reporting success or never returning to C.

/*
#include <stdint.h>
#include "swacache.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// boundStore is the handle value of a Go store attached by Cache.SetStore:
// the store and the cache whose calls run its callbacks (a tier of a tiered
// store is a plain Store).
type boundStore struct {
	s  Store
	cs *cacheState
}

// storeOf resolves the handle value the table carries as user_data.
func storeOf(h C.uintptr_t) (Store, *cacheState) {
	switch v := cgo.Handle(h).Value().(type) {
	case *boundStore:
		return v.s, v.cs
	default:
		return v.(Store), nil
	}
}

// goid is the running goroutine's id, read from its stack header
// ("goroutine 17 [running]:"); only for telling a store callback's goroutine
// apart in Cache.Close.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// writeMessage copies text into the library's message buffer, NUL-terminated
// and truncated to its capacity.
func writeMessage(msg *C.char, msgCap C.size_t, text string) {
	if msg == nil || msgCap == 0 {
		return
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(msg)), int(msgCap))
	n := copy(buf[:len(buf)-1], text)
	buf[n] = 0
}

// fail turns a store error into its status and message.
func fail(err error, msg *C.char, msgCap C.size_t) C.int {
	text := err.Error()
	if e, ok := err.(*Error); ok && e.Message != "" {
		text = e.Message // The library prefixes it with the call and key.
	}
	writeMessage(msg, msgCap, text)
	return C.int(codeOf(err))
}

// callStore runs f on a fresh goroutine and waits for it. f's status is the
// result when f returns; a panic becomes INTERNAL with the panic's text, and
// a goroutine that ended without f returning (panic(nil) before Go 1.21,
// runtime.Goexit) becomes INTERNAL with a message that says so.
// While f runs, its goroutine is registered with cs (when not nil), so that a
// Close of that cache from inside f fails instead of waiting for itself.
func callStore(cs *cacheState, msg *C.char, msgCap C.size_t, f func() C.int) C.int {
	status := C.int(CodeInternal)
	done := make(chan struct{})
	go func() {
		completed := false
		defer close(done)
		if cs != nil {
			id := goid()
			cs.enterCallback(id)
			defer cs.exitCallback(id)
		}
		defer func() {
			if completed {
				return
			}
			if r := recover(); r != nil {
				writeMessage(msg, msgCap, fmt.Sprintf("panic in Go store: %v", r))
			} else {
				writeMessage(msg, msgCap, "the Go store callback did not return: it called "+
					"runtime.Goexit (t.FailNow?) or panic(nil)")
			}
			status = C.int(CodeInternal)
		}()
		st := f()
		completed = true
		status = st
	}()
	<-done
	return status
}

func goBytes(p *C.uint8_t, n C.size_t) []byte {
	if n == 0 {
		return []byte{}
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n))
}

func iovs(iov *C.swa_iov_t, n C.size_t) []C.swa_iov_t {
	if n == 0 || iov == nil {
		return nil
	}
	return unsafe.Slice(iov, int(n))
}

//export swagoStorePut
func swagoStorePut(h C.uintptr_t, key *C.uint8_t, keyLen C.size_t, iov *C.swa_iov_t, nIov C.size_t,
	msg *C.char, msgCap C.size_t) C.int {
	st, cs := storeOf(h)
	return callStore(cs, msg, msgCap, func() C.int {
		var total int
		for _, v := range iovs(iov, nIov) {
			total += int(v.size)
		}
		blob := make([]byte, 0, total)
		for _, v := range iovs(iov, nIov) {
			if v.size > 0 {
				blob = append(blob, unsafe.Slice((*byte)(v.data), int(v.size))...)
			}
		}
		if err := st.Put(goBytes(key, keyLen), blob); err != nil {
			return fail(err, msg, msgCap)
		}
		return 0
	})
}

//export swagoStoreGet
func swagoStoreGet(h C.uintptr_t, key *C.uint8_t, keyLen C.size_t, iov *C.swa_iov_t, nIov C.size_t,
	blobSize *C.uint64_t, msg *C.char, msgCap C.size_t) C.int {
	st, cs := storeOf(h)
	return callStore(cs, msg, msgCap, func() C.int {
		blob, err := st.Get(goBytes(key, keyLen))
		if err != nil {
			return fail(err, msg, msgCap)
		}
		if uint64(len(blob)) != uint64(*blobSize) {
			*blobSize = C.uint64_t(len(blob)) // The library asks again or explains.
			return 0
		}
		rest := blob
		for _, v := range iovs(iov, nIov) {
			if v.size > 0 {
				rest = rest[copy(unsafe.Slice((*byte)(v.data), int(v.size)), rest):]
			}
		}
		return 0
	})
}

//export swagoStoreExists
func swagoStoreExists(h C.uintptr_t, key *C.uint8_t, keyLen C.size_t, exists *C.uint32_t,
	msg *C.char, msgCap C.size_t) C.int {
	st, cs := storeOf(h)
	return callStore(cs, msg, msgCap, func() C.int {
		ok, err := st.Exists(goBytes(key, keyLen))
		if err != nil {
			return fail(err, msg, msgCap)
		}
		*exists = 0
		if ok {
			*exists = 1
		}
		return 0
	})
}

//export swagoStoreRemove
func swagoStoreRemove(h C.uintptr_t, key *C.uint8_t, keyLen C.size_t, msg *C.char,
	msgCap C.size_t) C.int {
	st, cs := storeOf(h)
	return callStore(cs, msg, msgCap, func() C.int {
		if err := st.Remove(goBytes(key, keyLen)); err != nil {
			return fail(err, msg, msgCap)
		}
		return 0
	})
}

//export swagoStoreRelease
func swagoStoreRelease(h C.uintptr_t) {
	s, cs := storeOf(h)
	cgo.Handle(h).Delete()
	if r, ok := s.(StoreReleaser); ok {
		// Release cannot report: a panic or Goexit in it is dropped. A Close
		// of the cache from inside it (it may run inside that very Close) is
		// refused like one from any other callback.
		callStore(cs, nil, 0, func() C.int { r.Release(); return 0 })
	}
}
