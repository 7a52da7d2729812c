package swacache

// #include "capi.h"
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Seq is one sequence of a step (swa_seq_t): after the step it has SeqlenK
// tokens, SeqlenQ of them new. Its memory layout is the C struct's, so a
// []Seq is handed to swa_plan_build without a copy.
type Seq struct {
	Slot       uint32 // State slot (allocated, at most once per batch).
	SeqlenQ    int32  // New tokens this step, 0 <= SeqlenQ <= SeqlenK.
	SeqlenK    int32  // Tokens after the step.
	ValidStart int32  // Missing positions end; 0 = the slot's own.
}

// The Go and C layouts of a sequence must agree (checked at compile time).
var _ [unsafe.Sizeof(Seq{}) - C.sizeof_swa_seq_t]struct{}
var _ [C.sizeof_swa_seq_t - unsafe.Sizeof(Seq{})]struct{}

// Segment is a run of rows (swa_segment_t): Count rows from SrcRow (or zero
// rows when SrcRow is -1) to DstRow.
type Segment struct {
	DstRow int32 // First destination row.
	SrcRow int32 // First source row, or -1 for zero rows.
	Count  int32 // Rows in the run.
}

var _ [unsafe.Sizeof(Segment{}) - C.sizeof_swa_segment_t]struct{}
var _ [C.sizeof_swa_segment_t - unsafe.Sizeof(Segment{})]struct{}

// PlanOptions are the options of NewPlanWithOptions (swa_plan_options_t).
// The zero value is the library's default.
type PlanOptions struct {
	IndexPad IndexPad // Padding of the decode index.
	// LazyIndex keeps only offset_len in the plan (materialize_index = 0);
	// DecodeIndex then writes the index on demand.
	LazyIndex bool
}

// PlanInfo is the shape of a plan and the sizes of its arrays (swa_plan_info_t).
type PlanInfo struct {
	Path             PlanPath // PlanPathNone when not built.
	NSeqs            uint32   // Sequences in the batch.
	NTokens          int32    // T, new tokens of all sequences.
	Window           uint32   // W.
	RingLen          uint32   // R.
	Executed         bool     // A layer ran: the plan can no longer be cancelled.
	MaxSeqlenQ       int32    // Largest SeqlenQ.
	MaxSeqlenK       int32    // Largest SeqlenK.
	NLoadSegments    uint32   // Entries of LoadSegments (staged).
	NStoreSegments   uint32   // Entries of StoreSegments.
	HistoryRows      int32    // Staging section 1 rows (staged).
	StagingRows      int32    // Staging rows in all (staged).
	DecodeIndexElems uint64   // Entries of the decode index, T * W (ring).
	PivotElems       uint64   // Entries of the pivots, 4 T (staged).
}

// Plan is a step plan (swa_plan_t): built once per step, read by every layer.
// Create it with Cache.NewPlan and free it with Close; Cache.Close closes the
// plans still open on it.
//
// Threading: a plan is not thread-safe in C; this binding serialises calls on
// one Plan with a mutex, so concurrent use cannot corrupt it, but an engine
// should still drive a plan from one goroutine. Builds of different plans of
// one cache may run concurrently (the slot table's lock serialises them).
type Plan struct {
	c *Cache // Keeps the cache reachable while the plan is.
	s *planState
}

type planState struct {
	mu      sync.Mutex
	ptr     *C.swa_plan_t
	built   bool  // Built and not cancelled: nTokens is valid.
	nTokens int64 // T of the last successful build.
}

func (p *planState) destroy() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptr != nil {
		C.swa_plan_destroy(p.ptr)
		p.ptr = nil
	}
}

// NewPlan creates an empty plan with the default options (swa_plan_create).
// Thread-safe.
func (c *Cache) NewPlan() (*Plan, error) { return c.NewPlanWithOptions(PlanOptions{}) }

// NewPlanWithOptions creates an empty plan (swa_plan_create_with_options).
// Thread-safe.
func (c *Cache) NewPlanWithOptions(o PlanOptions) (*Plan, error) {
	cp, err := c.s.acquire()
	if err != nil {
		return nil, err
	}
	defer c.s.release()
	var ptr *C.swa_plan_t
	err = result(C.swago_plan_create(cp, C.uint32_t(o.IndexPad), cbool(!o.LazyIndex), &ptr))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	s := &planState{ptr: ptr}
	c.s.plansMu.Lock()
	c.s.plans[s] = struct{}{}
	c.s.plansMu.Unlock()
	p := &Plan{c: c, s: s}
	runtime.SetFinalizer(p, func(p *Plan) { p.Close() })
	return p, nil
}

// Close destroys the plan (swa_plan_destroy); a built plan's slot updates
// stay. Closing twice, or after Cache.Close, is a no-op and returns nil.
// Close on a nil *Plan (NewPlan failed) or a zero Plan returns an error
// matching ErrInvalidArgument and does nothing.
func (p *Plan) Close() error {
	if p == nil || p.s == nil || p.c == nil || p.c.s == nil {
		return nilHandleError("Plan", "Cache.NewPlan")
	}
	runtime.SetFinalizer(p, nil)
	cs := p.c.s
	if cs.pin() { // The cache must outlive the plan's destroy.
		p.s.destroy()
		cs.release()
	} // else Cache.Close destroyed the plan with the cache.
	cs.plansMu.Lock()
	if cs.plans != nil {
		delete(cs.plans, p.s)
	}
	cs.plansMu.Unlock()
	return nil
}

// lock read-locks the cache and locks the plan; unlock undoes both.
func (p *Plan) lock() (*C.swa_cache_t, *C.swa_plan_t, error) {
	if p == nil || p.s == nil || p.c == nil {
		return nil, nil, nilHandleError("Plan", "Cache.NewPlan")
	}
	cp, err := p.c.s.acquire()
	if err != nil {
		return nil, nil, closedError("plan")
	}
	p.s.mu.Lock()
	if p.s.ptr == nil {
		p.s.mu.Unlock()
		p.c.s.release()
		return nil, nil, closedError("plan")
	}
	return cp, p.s.ptr, nil
}

func (p *Plan) unlock() {
	p.s.mu.Unlock()
	p.c.s.release()
	runtime.KeepAlive(p)
}

// Build plans one step (swa_plan_build): it validates every sequence, then
// advances each slot (WrittenEnd = SeqlenK) and computes every index of the
// step. seqs is read in place and not kept. On failure the message names the
// sequence and its numbers, and neither the slots nor the plan change.
// Not thread-safe with other calls on the same plan (serialised here).
func (p *Plan) Build(seqs []Seq) error {
	_, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	var ptr *C.swa_seq_t
	if len(seqs) > 0 {
		ptr = (*C.swa_seq_t)(unsafe.Pointer(&seqs[0]))
	}
	if uint64(len(seqs)) > 1<<32-1 {
		return errorf(CodeInvalidArgument, "%d sequences do not fit uint32", len(seqs))
	}
	if err := result(C.swago_plan_build(pp, ptr, C.uint32_t(len(seqs)))); err != nil {
		return err
	}
	var t int64
	for i := range seqs {
		t += int64(seqs[i].SeqlenQ)
	}
	p.s.built, p.s.nTokens = true, t
	return nil
}

// Cancel undoes a built plan that no layer has run (swa_plan_cancel): every
// slot it advanced gets its state from before the build back. Not thread-safe
// with other calls on the same plan (serialised here).
func (p *Plan) Cancel() error {
	_, pp, err := p.lock()
	if err != nil {
		return err
	}
	defer p.unlock()
	if err := result(C.swago_plan_cancel(pp)); err != nil {
		return err
	}
	p.s.built, p.s.nTokens = false, 0
	return nil
}

// Info reads the shape of the plan and the sizes of its arrays
// (swa_plan_info). Safe concurrently with other readers (serialised here).
func (p *Plan) Info() (PlanInfo, error) {
	_, pp, err := p.lock()
	if err != nil {
		return PlanInfo{}, err
	}
	defer p.unlock()
	return p.infoLocked(pp)
}

func (p *Plan) infoLocked(pp *C.swa_plan_t) (PlanInfo, error) {
	var o C.swa_plan_info_t
	o.struct_size = C.sizeof_swa_plan_info_t
	if err := result(C.swago_plan_info(pp, &o)); err != nil {
		return PlanInfo{}, err
	}
	return PlanInfo{Path: PlanPath(o.path), NSeqs: uint32(o.n_seqs), NTokens: int32(o.n_tokens),
		Window: uint32(o.window), RingLen: uint32(o.ring_len), Executed: o.executed != 0,
		MaxSeqlenQ: int32(o.max_seqlen_q), MaxSeqlenK: int32(o.max_seqlen_k),
		NLoadSegments: uint32(o.n_load_segments), NStoreSegments: uint32(o.n_store_segments),
		HistoryRows: int32(o.history_rows), StagingRows: int32(o.staging_rows),
		DecodeIndexElems: uint64(o.decode_index_elems), PivotElems: uint64(o.pivot_elems)}, nil
}

func i32ptr(s []int32) *C.int32_t {
	if len(s) == 0 {
		return (*C.int32_t)(emptyPtr())
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

// DecodeIndex exports the ring-only decode gather (swa_plan_decode_index):
// offsetLen is int32 [T, 2] (first ring row, key count) and index int32
// [T, W], oldest key first, then padding. FAILED_PRECONDITION for a plan not
// built or on the staged path.
func (p *Plan) DecodeIndex() (offsetLen, index []int32, err error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, nil, err
	}
	defer p.unlock()
	info, err := p.infoLocked(pp)
	if err != nil {
		return nil, nil, err
	}
	t := int(info.NTokens)
	offsetLen = make([]int32, 2*t)
	index = make([]int32, t*int(info.Window))
	if err := result(C.swago_plan_decode_index(pp, i32ptr(offsetLen), i32ptr(index))); err != nil {
		return nil, nil, err
	}
	return offsetLen, index, nil
}

// LoadSegments exports the staged path's load plan (swa_plan_load_segments).
func (p *Plan) LoadSegments() ([]Segment, error) {
	return p.segments(func(pp *C.swa_plan_t, out *C.swa_segment_t, n C.size_t, count *C.size_t) C.swago_ret {
		return C.swago_plan_load_segments(pp, out, n, count)
	})
}

// StoreSegments exports the store plan as runs (swa_plan_store_segments).
func (p *Plan) StoreSegments() ([]Segment, error) {
	return p.segments(func(pp *C.swa_plan_t, out *C.swa_segment_t, n C.size_t, count *C.size_t) C.swago_ret {
		return C.swago_plan_store_segments(pp, out, n, count)
	})
}

func (p *Plan) segments(call func(*C.swa_plan_t, *C.swa_segment_t, C.size_t, *C.size_t) C.swago_ret) ([]Segment, error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer p.unlock()
	var n C.size_t
	if err := result(call(pp, nil, 0, &n)); err != nil {
		return nil, err
	}
	out := make([]Segment, int(n))
	if n == 0 {
		return out, nil
	}
	if err := result(call(pp, (*C.swa_segment_t)(unsafe.Pointer(&out[0])), n, &n)); err != nil {
		return nil, err
	}
	return out[:int(n)], nil
}

// Pivots exports the staged path's pivots, int32 [T, 4] (swa_plan_pivots).
func (p *Plan) Pivots() ([]int32, error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer p.unlock()
	info, err := p.infoLocked(pp)
	if err != nil {
		return nil, err
	}
	out := make([]int32, 4*int(info.NTokens))
	if err := result(C.swago_plan_pivots(pp, i32ptr(out))); err != nil {
		return nil, err
	}
	return out, nil
}

// StoreRows exports the ring row of each new token, or -1 for a token the
// step does not store, int32 [T] (swa_plan_store_rows).
func (p *Plan) StoreRows() ([]int32, error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer p.unlock()
	info, err := p.infoLocked(pp)
	if err != nil {
		return nil, err
	}
	out := make([]int32, int(info.NTokens))
	if err := result(C.swago_plan_store_rows(pp, i32ptr(out))); err != nil {
		return nil, err
	}
	return out, nil
}

// SeqOffsets exports per-sequence offsets (swa_plan_seq_offsets):
// cuSeqlensQ [n_seqs + 1], qStart [n_seqs] and the effective validStart
// [n_seqs] the plan used.
func (p *Plan) SeqOffsets() (cuSeqlensQ, qStart, validStart []int32, err error) {
	_, pp, err := p.lock()
	if err != nil {
		return nil, nil, nil, err
	}
	defer p.unlock()
	info, err := p.infoLocked(pp)
	if err != nil {
		return nil, nil, nil, err
	}
	n := int(info.NSeqs)
	cuSeqlensQ, qStart, validStart = make([]int32, n+1), make([]int32, n), make([]int32, n)
	if err := result(C.swago_plan_seq_offsets(pp, i32ptr(cuSeqlensQ), i32ptr(qStart), i32ptr(validStart))); err != nil {
		return nil, nil, nil, err
	}
	return cuSeqlensQ, qStart, validStart, nil
}
