package swacache

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	if VersionNumber() != HeaderVersionNumber {
		t.Fatalf("library %d, header %d", VersionNumber(), HeaderVersionNumber)
	}
	v := VersionNumber()
	if want := fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100); Version() != want {
		t.Fatalf("Version() = %q, want %q", Version(), want)
	}
}

func TestErrorsAndCodes(t *testing.T) {
	if CodeInvalidArgument.String() != "INVALID_ARGUMENT" || CodeUnauthenticated.String() != "UNAUTHENTICATED" ||
		Code(99).String() != "UNRECOGNIZED_STATUS" {
		t.Fatal("code names")
	}
	sentinels := []*Error{nil, ErrCancelled, ErrUnknown, ErrInvalidArgument, ErrDeadlineExceeded,
		ErrNotFound, ErrAlreadyExists, ErrPermissionDenied, ErrResourceExhausted,
		ErrFailedPrecondition, ErrAborted, ErrOutOfRange, ErrUnimplemented, ErrInternal,
		ErrUnavailable, ErrDataLoss, ErrUnauthenticated}
	for code := Code(1); code <= CodeUnauthenticated; code++ {
		err := fmt.Errorf("wrapped: %w", newError(code, "m"))
		for i, s := range sentinels[1:] {
			if got, want := errors.Is(err, s), Code(i+1) == code; got != want {
				t.Fatalf("errors.Is(%v, %v) = %v", err, s, got)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != code || e.Message != "m" {
			t.Fatalf("errors.As: %+v", e)
		}
		if errors.Is(err, ErrClosed) {
			t.Fatal("a library error matched ErrClosed")
		}
	}
	if got := newError(CodeOK, "x").(*Error).Code; got != CodeUnknown {
		t.Fatalf("OK as an error became %v", got)
	}
	if s := (&Error{Code: CodeNotFound, Message: "k"}).Error(); s != "swacache: NOT_FOUND: k" {
		t.Fatal(s)
	}
	if s := ErrNotFound.Error(); s != "swacache: NOT_FOUND" {
		t.Fatal(s)
	}
}

func TestConfigAndLayout(t *testing.T) {
	cfg := testConfig(FormatMXFP8)
	want, err := ComputeLayout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Layout()
	if err != nil || got != want {
		t.Fatalf("Layout() = %+v, %v; ComputeLayout = %+v", got, err, want)
	}
	if got.Window != tW || got.RingLen != tW+tN+1 || got.NumLayers != 2 || got.MaxSlots != tSlots ||
		got.PoolBytes != uint64(tSlots)*got.SlotBytes || got.Fingerprint == 0 {
		t.Fatalf("layout %+v", got)
	}
	l1, err := c.LayerLayout(1)
	if err != nil || l1.HeadsPerToken != 4 || l1.VecBytes != tD+tD/32 || l1.BytesPerToken != 4*l1.VecBytes ||
		l1.RingLen != got.RingLen {
		t.Fatalf("LayerLayout(1) = %+v, %v", l1, err)
	}
	if _, err := c.LayerLayout(2); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("LayerLayout(2): %v", err)
	}
	v, err := c.LayerView(1)
	if err != nil || v.Data == 0 || v.Backend != BackendCPU || v.Device != -1 || v.NDim != 4 ||
		v.Shape != [4]int64{tSlots, int64(got.RingLen), 4, int64(l1.VecBytes)} ||
		v.Strides != [4]int64{int64(got.SlotBytes), int64(l1.BytesPerToken), int64(l1.VecBytes), 1} {
		t.Fatalf("LayerView(1) = %+v, %v", v, err)
	}
	if _, err := c.LayerView(9); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("LayerView(9): %v", err)
	}
	st, err := c.Stats()
	if err != nil || st.MaxSlots != tSlots || st.PoolBytes != got.PoolBytes || st.SlotsInUse != 0 {
		t.Fatalf("Stats() = %+v, %v", st, err)
	}

	bad := testConfig(FormatMXFP8)
	bad.Layers[1].HeadDim = 100
	_, err = NewCache(bad)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "100") {
		t.Fatalf("bad head_dim: %v", err)
	}
	if _, err := ComputeLayout(bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ComputeLayout(bad): %v", err)
	}
	noLayers := DefaultConfig()
	if _, err := NewCache(noLayers); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no layers: %v", err)
	}
	cuda := testConfig(FormatMXFP8)
	cuda.Backend = BackendCUDA
	if c2, err := NewCache(cuda); err == nil {
		c2.Close() // A CUDA build with a device.
	} else if !errors.Is(err, ErrUnimplemented) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CUDA backend: %v", err)
	}
}

func TestSlots(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	var slots []uint32
	for i := 0; i < tSlots; i++ {
		s, err := c.AllocSlot()
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
	}
	if _, err := c.AllocSlot(); !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("alloc of a full pool: %v", err)
	}
	if err := c.FreeSlot(slots[3]); err != nil {
		t.Fatal(err)
	}
	if err := c.FreeSlot(slots[3]); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("double free: %v", err)
	}
	if err := c.FreeSlot(tSlots); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("free past the pool: %v", err)
	}
	info, err := c.SlotInfo(slots[3])
	if err != nil || info.Allocated || info.Slot != slots[3] {
		t.Fatalf("SlotInfo of a free slot = %+v, %v", info, err)
	}
	if _, err := c.SlotInfo(tSlots); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("SlotInfo past the pool: %v", err)
	}

	p, _ := c.NewPlan()
	a, b := slots[0], slots[1]
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: 5, SeqlenK: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := c.CopySlot(a, b); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.SlotInfo(b); info.WrittenEnd != 5 || !info.Allocated {
		t.Fatalf("copied slot %+v", info)
	}
	if err := c.CopySlot(a, slots[3]); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("copy to a free slot: %v", err)
	}
	if err := c.CopySlot(a, 99); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("copy past the pool: %v", err)
	}
	if err := c.SetValidStart(b, 3); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.SlotInfo(b); info.ValidStart != 3 {
		t.Fatalf("valid_start %+v", info)
	}
	if err := c.SetValidStart(b, 2); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("lowering valid_start: %v", err)
	}
	if err := c.SetValidStart(b, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative valid_start: %v", err)
	}
	if _, _, err := c.BeginReplay(b, 20); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("replay into a slot with positions: %v", err)
	}
	if err := c.ResetSlot(b); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetSlot(slots[3]); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("reset of a free slot: %v", err)
	}
	start, n, err := c.BeginReplay(b, 20)
	if err != nil || start != 20-tW || n != tW {
		t.Fatalf("BeginReplay = %d, %d, %v", start, n, err)
	}
	if _, _, err := c.BeginReplay(b, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative hit: %v", err)
	}
	if info, _ := c.SlotInfo(b); info.WrittenEnd != 20-tW || info.ValidStart != 20-tW {
		t.Fatalf("replay slot %+v", info)
	}
	if st, _ := c.Stats(); st.SlotsInUse != tSlots-1 {
		t.Fatalf("in use %d", st.SlotsInUse)
	}
}

func TestPlanExports(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	p, err := c.NewPlanWithOptions(PlanOptions{IndexPad: IndexPadLastRow, LazyIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.AllocSlot()
	b, _ := c.AllocSlot()
	const R = tW + tN + 1

	// Not built: every exporter refuses.
	if _, _, err := p.DecodeIndex(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("DecodeIndex unbuilt: %v", err)
	}
	if _, err := p.StoreRows(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("StoreRows unbuilt: %v", err)
	}
	if err := p.Cancel(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("Cancel unbuilt: %v", err)
	}
	// Errors name the sequence; nothing changes.
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: 1, SeqlenK: 3}}); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("gap: %v", err)
	}
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: 2, SeqlenK: 1}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("seqlen_q > seqlen_k: %v", err)
	}
	if err := p.Build([]Seq{{Slot: 99, SeqlenQ: 1, SeqlenK: 1}}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("slot past the pool: %v", err)
	}
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: 1, SeqlenK: 1}, {Slot: a, SeqlenQ: 1, SeqlenK: 1}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("slot twice: %v", err)
	}

	// Ring-only: a at positions 0..2, b at 0..1.
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: 3, SeqlenK: 3}, {Slot: b, SeqlenQ: 2, SeqlenK: 2}}); err != nil {
		t.Fatal(err)
	}
	info, err := p.Info()
	if err != nil || info.Path != PlanPathRing || info.NSeqs != 2 || info.NTokens != 5 || info.Window != tW ||
		info.RingLen != R || info.MaxSeqlenQ != 3 || info.MaxSeqlenK != 3 || info.DecodeIndexElems != 5*tW {
		t.Fatalf("Info() = %+v, %v", info, err)
	}
	ol, idx, err := p.DecodeIndex()
	if err != nil {
		t.Fatal(err)
	}
	// Token t of seq s at position p sees rows s*R + 0..p, padded with its own row.
	tok := 0
	for _, sq := range []struct{ slot, n int }{{int(a), 3}, {int(b), 2}} {
		for j := 0; j < sq.n; j++ {
			row0 := int32(sq.slot * R)
			if ol[2*tok] != row0 || ol[2*tok+1] != int32(j+1) {
				t.Fatalf("offset_len[%d] = %v", tok, ol[2*tok:2*tok+2])
			}
			for k := 0; k < tW; k++ {
				want := row0 + int32(k)
				if k > j {
					want = row0 + int32(j)
				}
				if idx[tok*tW+k] != want {
					t.Fatalf("index[%d] = %v", tok, idx[tok*tW:(tok+1)*tW])
				}
			}
			tok++
		}
	}
	rows, err := p.StoreRows()
	if err != nil || fmt.Sprint(rows) != fmt.Sprint([]int32{int32(a) * R, int32(a)*R + 1, int32(a)*R + 2, int32(b) * R, int32(b)*R + 1}) {
		t.Fatalf("StoreRows = %v, %v", rows, err)
	}
	segs, err := p.StoreSegments()
	if err != nil || len(segs) != 2 || segs[0] != (Segment{int32(a) * R, 0, 3}) || segs[1] != (Segment{int32(b) * R, 3, 2}) {
		t.Fatalf("StoreSegments = %v, %v", segs, err)
	}
	cu, qs, vs, err := p.SeqOffsets()
	if err != nil || fmt.Sprint(cu, qs, vs) != "[0 3 5] [0 0] [0 0]" {
		t.Fatalf("SeqOffsets = %v %v %v, %v", cu, qs, vs, err)
	}
	if _, err := p.Pivots(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("Pivots on the ring path: %v", err)
	}
	if _, err := p.LoadSegments(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("LoadSegments on the ring path: %v", err)
	}
	// Cancel restores both slots.
	if err := p.Cancel(); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.SlotInfo(a); info.WrittenEnd != 0 {
		t.Fatalf("after cancel %+v", info)
	}

	// Staged: 12 new tokens on a (more than R - W + 1 = 4, and more than R).
	const n = 12
	if err := p.Build([]Seq{{Slot: a, SeqlenQ: n, SeqlenK: n}}); err != nil {
		t.Fatal(err)
	}
	info, _ = p.Info()
	if info.Path != PlanPathStaged || info.HistoryRows != tW || info.StagingRows != tW+n || info.PivotElems != 4*n {
		t.Fatalf("staged Info() = %+v", info)
	}
	load, err := p.LoadSegments()
	if err != nil || len(load) != int(info.NLoadSegments) || load[0] != (Segment{0, -1, tW}) {
		t.Fatalf("LoadSegments = %v, %v", load, err)
	}
	piv, err := p.Pivots()
	if err != nil || len(piv) != 4*n {
		t.Fatalf("Pivots = %v, %v", piv, err)
	}
	// Token j at position j sees positions max(0, j-W+1)..j, all in section 2.
	for j := 0; j < n; j++ {
		lo := j - tW + 1
		if lo < 0 {
			lo = 0
		}
		want := [4]int32{tW, 0, int32(tW + lo), int32(j - lo + 1)}
		if got := [4]int32{piv[4*j], piv[4*j+1], piv[4*j+2], piv[4*j+3]}; got != want {
			t.Fatalf("pivots[%d] = %v, want %v", j, got, want)
		}
	}
	// The staged path stores the last min(n, R) tokens.
	rows, _ = p.StoreRows()
	for j := 0; j < n; j++ {
		want := int32(a)*R + int32(j%R)
		if j < n-R {
			want = -1
		}
		if rows[j] != want {
			t.Fatalf("staged StoreRows = %v", rows)
		}
	}
	if _, _, err := p.DecodeIndex(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("DecodeIndex on the staged path: %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	c, err := NewCache(testConfig(FormatFP32))
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := c.AllocSlot()
	p, _ := c.NewPlan()
	p2, _ := c.NewPlan()
	if err := p2.Close(); err != nil || p2.Close() != nil {
		t.Fatal("plan double close")
	}
	if err := p2.Build(nil); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("Build on a closed plan: %v", err)
	}
	if err := p.Build([]Seq{{Slot: slot, SeqlenQ: 1, SeqlenK: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", what, err)
		}
	}
	_, err = c.Layout()
	closed("Layout", err)
	_, err = c.LayerLayout(0)
	closed("LayerLayout", err)
	_, err = c.LayerView(0)
	closed("LayerView", err)
	_, err = c.Stats()
	closed("Stats", err)
	_, err = c.AllocSlot()
	closed("AllocSlot", err)
	closed("FreeSlot", c.FreeSlot(slot))
	closed("ResetSlot", c.ResetSlot(slot))
	closed("CopySlot", c.CopySlot(slot, slot))
	_, err = c.SlotInfo(slot)
	closed("SlotInfo", err)
	closed("SetValidStart", c.SetValidStart(slot, 1))
	_, _, err = c.BeginReplay(slot, 1)
	closed("BeginReplay", err)
	_, err = c.NewPlan()
	closed("NewPlan", err)
	closed("SetStore", c.SetStore(newMapStore()))
	closed("Save", c.Save(slot, []byte("k")))
	closed("Restore", c.Restore(slot, []byte("k")))
	_, err = c.StoreExists([]byte("k"))
	closed("StoreExists", err)
	closed("StoreRemove", c.StoreRemove([]byte("k")))
	// The plan was closed with its cache.
	closed("Plan.Build", p.Build(nil))
	closed("Plan.Cancel", p.Cancel())
	closed("Plan.Step", p.Step(&StepArgs{}))
	_, err = p.Info()
	closed("Plan.Info", err)
	_, _, err = p.DecodeIndex()
	closed("Plan.DecodeIndex", err)
	_, err = p.LoadSegments()
	closed("Plan.LoadSegments", err)
	_, err = p.StoreSegments()
	closed("Plan.StoreSegments", err)
	_, err = p.Pivots()
	closed("Plan.Pivots", err)
	_, err = p.StoreRows()
	closed("Plan.StoreRows", err)
	_, _, _, err = p.SeqOffsets()
	closed("Plan.SeqOffsets", err)
	if err := p.Close(); err != nil {
		t.Fatalf("Plan.Close after Cache.Close: %v", err)
	}
}

// Unreachable handles are freed by their finalizers, silently.
func TestFinalizers(t *testing.T) {
	for i := 0; i < 4; i++ {
		c, err := NewCache(testConfig(FormatFP32))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.NewPlan(); err != nil {
			t.Fatal(err)
		}
		s, _ := NewMemoryStore(1 << 20)
		_ = s
	}
	runtime.GC()
	runtime.GC()
}
