// Package swacache is the Go binding of libswacache, the sliding-window
// attention KV cache library, over its C99 ABI (include/swacache.h).
//
// A Cache owns the slot pool; a Plan is built once per engine step and run
// for every layer with Plan.Step; slots are saved to and restored from a
// Store. Semantics are the C library's (docs/semantics.md): this package
// adds Go types, length checks and lifetime safety, nothing else.
//
// # Lifetimes
//
// Cache, Plan and BuiltinStore are freed by an explicit, idempotent Close.
// Using a closed handle returns an error matching ErrClosed, never a crash.
// Finalizers free unreachable handles as a silent safety net only; close
// handles explicitly. Closing a Cache closes its open Plans.
//
// # Memory
//
// Step tensors are []float32 or []uint16 (bfloat16 bits), and plan batches
// []Seq; they are passed to C in place, without copying, after their lengths
// are checked in Go. The library keeps no Go pointer after a call returns.
// Store callbacks receive fresh Go copies of the library's borrowed buffers.
//
// # Errors
//
// Every failure is an *Error carrying the C status Code and the library's
// message (read on the same OS thread as the failing call). errors.Is matches
// the sentinels ErrInvalidArgument, ErrNotFound, ... by code.
//
// # Threading
//
// Each method documents the C header's rule. The thread-safe calls (slot
// calls, layouts, stats, Save, Restore, plan creation, store queries) may be
// called from many goroutines at once. A Plan's calls are serialised by the
// binding; an engine still drives each plan from one goroutine, and must not
// step slots that another goroutine is saving, restoring or freeing.
package swacache
