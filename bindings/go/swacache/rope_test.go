package swacache

// RoPE as a service and per-token positions from Go: RopeApply's inverse of
// its forward rotation equals a de-rotating layer's step output over one key
// (the key stored rotated, rotated back: the step's own rotations), bit for
// bit; explicit cache positions equal none; negative and short positions are
// refused; the table; AttentionMerge without a cache equals the cached merge.

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
)

var ropePositions = []int32{0, 3, 4095, 65537, 2147483647}

func ropeLayer() LayerDesc {
	l := DefaultLayerDesc()
	l.QHeads, l.KVHeads, l.HeadDim, l.KVFormat = 2, 2, 64, FormatFP32
	l.RopeStyle, l.RopeFirstDim, l.RopeDims, l.RopeTheta, l.RopeYarnFactor = RopeGptj, 32, 32, 150000, 8
	return l
}

func ropeCache(t *testing.T, l LayerDesc, window, slots uint32) *Cache {
	cfg := DefaultConfig()
	cfg.Window, cfg.MaxSlots, cfg.Backend, cfg.NumThreads = window, slots, BackendCPU, 1
	cfg.Layers = []LayerDesc{l}
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRopeApplyEqualsTheStepsRotation(t *testing.T) {
	l := ropeLayer()
	l.RopeDerotateOutput = true
	n := len(ropePositions)
	c := ropeCache(t, l, 4, uint32(n))
	r := rand.New(rand.NewSource(7))
	q, k := randF32(r, n*2*64), randF32(r, n*2*64)
	seqs := make([]Seq, n)
	for i := range seqs {
		s, err := c.AllocSlot()
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = Seq{Slot: s, SeqlenQ: 1, SeqlenK: 1}
	}
	p, err := c.NewPlan()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Build(seqs); err != nil {
		t.Fatal(err)
	}
	out := poisonF32(n * 2 * 64)
	if err := p.Step(&StepArgs{Q: F32(q), K: F32(k), Out: F32(out), Positions: ropePositions}); err != nil {
		t.Fatal(err)
	}
	mine := append([]float32(nil), k...)
	if err := RopeApply(l, F32(mine), 2, ropePositions, false); err != nil {
		t.Fatal(err)
	}
	if err := RopeApply(l, F32(mine), 2, ropePositions, true); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(mine[i]) {
			t.Fatalf("element %d: step %v, RopeApply %v", i, out[i], mine[i])
		}
	}
}

func TestStepPositions(t *testing.T) {
	l := ropeLayer()
	l.SharedKV = false
	r := rand.New(rand.NewSource(8))
	q, k, v := randF32(r, 4*2*64), randF32(r, 4*2*64), randF32(r, 4*2*64)
	run := func(pos []int32) ([]float32, error) {
		c := ropeCache(t, l, 8, 1)
		s, _ := c.AllocSlot()
		p, err := c.NewPlan()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Build([]Seq{{Slot: s, SeqlenQ: 4, SeqlenK: 4}}); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, 4*2*64)
		return out, p.Step(&StepArgs{Q: F32(q), K: F32(k), V: F32(v), Out: F32(out), Positions: pos})
	}
	none, err := run(nil)
	if err != nil {
		t.Fatal(err)
	}
	given, err := run([]int32{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range none {
		if math.Float32bits(none[i]) != math.Float32bits(given[i]) {
			t.Fatalf("element %d: no positions %v, cache positions %v", i, none[i], given[i])
		}
	}
	var e *Error
	if _, err := run([]int32{0, 1, -2, 3}); !errors.As(err, &e) || e.Code != CodeInvalidArgument ||
		!strings.Contains(e.Message, "positions[2] = -2") {
		t.Fatalf("negative position: %v", err)
	}
	if _, err := run([]int32{0, 1}); !errors.As(err, &e) || e.Code != CodeInvalidArgument {
		t.Fatalf("short positions: %v", err)
	}
}

func TestRopeTable(t *testing.T) {
	freq, info, err := RopeTable(ropeLayer())
	if err != nil {
		t.Fatal(err)
	}
	if len(freq) != 16 || info.Style != RopeGptj || info.FirstDim != 32 || info.Dims != 32 || info.DerotateOutput {
		t.Fatalf("table %d entries, info %+v", len(freq), info)
	}
	if want := float32(0.1*math.Log(8) + 1); math.Abs(float64(info.AttentionFactor-want)) > 1e-6 {
		t.Fatalf("attention factor %v, want %v", info.AttentionFactor, want)
	}
	if freq[0] != 1 {
		t.Fatalf("inv_freq[0] = %v, want 1", freq[0])
	}
	bad := ropeLayer()
	bad.RopeDims = 7
	var e *Error
	if _, _, err := RopeTable(bad); !errors.As(err, &e) || !strings.Contains(e.Message, "rope_dims = 7") {
		t.Fatalf("bad layer: %v", err)
	}
	x := make([]float32, 2*64)
	if err := RopeApply(ropeLayer(), F32(x), 1, []int32{0, -1}, false); !errors.As(err, &e) ||
		!strings.Contains(e.Message, "positions[1] = -1") {
		t.Fatalf("negative position: %v", err)
	}
}

func TestAttentionMergeWithoutACache(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	const rows, d = 6, 32
	a, b := randF32(r, rows*d), randF32(r, rows*d)
	la, lb := randF32(r, rows), randF32(r, rows)
	o1, o2 := make([]float32, rows*d), make([]float32, rows*d)
	l1, l2 := make([]float32, rows), make([]float32, rows)
	if err := AttentionMerge(&MergeArgs{HeadDim: d, OutA: F32(a), LSEA: la, OutB: F32(b), LSEB: lb, Out: F32(o1),
		LSE: l1}); err != nil {
		t.Fatal(err)
	}
	c := newTestCache(t, FormatFP32)
	if err := c.AttentionMerge(&MergeArgs{HeadDim: d, OutA: F32(a), LSEA: la, OutB: F32(b), LSEB: lb, Out: F32(o2),
		LSE: l2}); err != nil {
		t.Fatal(err)
	}
	for i := range o1 {
		if math.Float32bits(o1[i]) != math.Float32bits(o2[i]) {
			t.Fatalf("element %d: %v without a cache, %v with", i, o1[i], o2[i])
		}
	}
	m := math.Max(float64(la[0]), float64(lb[0]))
	wa, wb := math.Exp(float64(la[0])-m), math.Exp(float64(lb[0])-m)
	if want := (wa*float64(a[0]) + wb*float64(b[0])) / (wa + wb); math.Abs(float64(o1[0])-want) > 1e-6 {
		t.Fatalf("out[0] = %v, want %v", o1[0], want)
	}
}
