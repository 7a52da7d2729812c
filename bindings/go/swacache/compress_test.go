package swacache

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"unsafe"
)

// A CSA layer (rate 4, d 16, rows Ca | Cb of 32, an indexer of d 8) and an HCA
// layer (rate 4, d 16), FP32 rows, no RoPE on the entries: the float64
// reference below recomputes each closing entry from the sequence's history.
func compressConfig() Config {
	cfg := DefaultConfig()
	cfg.Window, cfg.DraftTokens, cfg.MaxSlots = 8, 2, 2
	cfg.Backend, cfg.NumThreads = BackendCPU, 1
	csa := DefaultLayerDesc()
	csa.QHeads, csa.KVHeads, csa.HeadDim, csa.SharedKV, csa.KVFormat = 2, 1, 32, true, FormatFP32
	hca := csa
	csa.CompressKind, csa.CompressRatio, csa.CompressHeadDim, csa.IndexHeadDim = CompressCSA, 4, 16, 8
	hca.CompressKind, hca.CompressRatio, hca.CompressHeadDim = CompressHCA, 4, 16
	cfg.Layers = []LayerDesc{csa, hca}
	return cfg
}

// refEntry is entry w of a compressor with rows hist[p] = (kv [S], gate [S]).
func refEntry(csa bool, c, d int, kv, gate [][]float32, bias, weight []float32, w int) []float64 {
	S := d
	if csa {
		S = 2 * d
	}
	x := make([]float64, d)
	for f := 0; f < d; f++ {
		type slot struct{ v, l float64 }
		var slots []slot
		add := func(p, idx, brow int) {
			if p >= 0 {
				slots = append(slots, slot{float64(kv[p][idx]), float64(gate[p][idx]) + float64(bias[brow*S+idx])})
			}
		}
		if csa {
			for j := 0; j < c; j++ {
				add((w-1)*c+j, f, j)
			}
			for j := 0; j < c; j++ {
				add(w*c+j, d+f, j)
			}
		} else {
			for j := 0; j < c; j++ {
				add(w*c+j, f, j)
			}
		}
		m := math.Inf(-1)
		for _, s := range slots {
			m = math.Max(m, s.l)
		}
		var sum, acc float64
		for _, s := range slots {
			sum += math.Exp(s.l - m)
		}
		for _, s := range slots {
			acc += s.v * math.Exp(s.l-m) / sum
		}
		x[f] = acc
	}
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	r := 1 / math.Sqrt(ss/float64(d)+1e-6)
	for f := range x {
		x[f] *= r * float64(weight[f])
	}
	return x
}

func TestCompressStepMatchesTheReferenceThroughRejectedDrafts(t *testing.T) {
	c, err := NewCache(compressConfig())
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	defer c.Close()
	if ll, err := c.LayerLayout(0); err != nil || ll.CompressKind != CompressCSA || ll.CompressLen != 2*4+2 ||
		ll.IndexHeadDim != 8 || ll.CompressRowValues != 32 {
		t.Fatalf("layer 0 layout %+v, %v", ll, err)
	}
	slot, _ := c.AllocSlot()
	plan, err := c.NewPlan()
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	rng := rand.New(rand.NewSource(5))
	type comp struct {
		layer, k  uint32
		csa       bool
		d, S      int
		bias, wgt []float32
		kv, gate  [][]float32
	}
	comps := []*comp{{layer: 0, k: 0, csa: true, d: 16, S: 32}, {layer: 0, k: 1, csa: true, d: 8, S: 16},
		{layer: 1, k: 0, d: 16, S: 16}}
	for _, cp := range comps {
		cp.bias = make([]float32, 4*cp.S)
		cp.wgt = make([]float32, cp.d)
		for i := range cp.bias {
			cp.bias[i] = float32(rng.NormFloat64() * 0.5)
		}
		for i := range cp.wgt {
			cp.wgt[i] = float32(1 + 0.2*rng.NormFloat64())
		}
	}
	end, checked := 0, 0
	for step := 0; step < 30; step++ {
		start, n := end, 1+rng.Intn(7)
		if step >= 4 { // 1 + N tokens; drafts rejected at a random depth
			start = end - 3 + rng.Intn(3)
			n = 3
		}
		if err := plan.Build([]Seq{{Slot: slot, SeqlenQ: int32(n), SeqlenK: int32(start + n)}}); err != nil {
			t.Fatalf("step %d: Build: %v", step, err)
		}
		end = start + n
		for _, cp := range comps {
			kv := make([]float32, n*cp.S)
			gate := make([]float32, n*cp.S)
			for i := range kv {
				kv[i], gate[i] = float32(rng.NormFloat64()), float32(3*rng.NormFloat64())
			}
			cp.kv, cp.gate = cp.kv[:start], cp.gate[:start]
			for i := 0; i < n; i++ {
				cp.kv = append(cp.kv, kv[i*cp.S:(i+1)*cp.S])
				cp.gate = append(cp.gate, gate[i*cp.S:(i+1)*cp.S])
			}
			wins, err := plan.CompressWindows(cp.layer)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, (len(wins)+1)*cp.d)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			err = plan.CompressStep(&CompressArgs{Layer: cp.layer, Compressor: cp.k, KV: F32(kv), Gate: F32(gate),
				RowWidth: uint32(cp.S), PositionBias: cp.bias, NormWeight: cp.wgt, Out: F32(out), EntryDim: uint32(cp.d)})
			if err != nil {
				t.Fatalf("step %d layer %d/%d: %v", step, cp.layer, cp.k, err)
			}
			if want := (start+n)/4 - start/4; len(wins) != want {
				t.Fatalf("step %d: %d windows, want %d", step, len(wins), want)
			}
			for k, w := range wins {
				if int(w.Entry) != start/4+k || w.Position != 4*w.Entry || w.Slot != slot {
					t.Fatalf("step %d window %d: %+v", step, k, w)
				}
				ref := refEntry(cp.csa, 4, cp.d, cp.kv, cp.gate, cp.bias, cp.wgt, int(w.Entry))
				for f := 0; f < cp.d; f++ {
					if got := float64(out[k*cp.d+f]); math.Abs(got-ref[f]) > 2e-5*math.Max(1, math.Abs(ref[f])) {
						t.Fatalf("step %d layer %d/%d entry %d feature %d: %g, want %g", step, cp.layer, cp.k,
							w.Entry, f, got, ref[f])
					}
				}
				checked++
			}
			for _, v := range out[len(wins)*cp.d:] {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("a row past the windows was written")
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d entries checked", checked)
	}
}

func TestCompressRingViewSegmentsAndRefusals(t *testing.T) {
	c, err := NewCache(compressConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slot, _ := c.AllocSlot()
	plan, _ := c.NewPlan()
	defer plan.Close()
	if err := plan.Build([]Seq{{Slot: slot, SeqlenQ: 3, SeqlenK: 3}}); err != nil {
		t.Fatal(err)
	}
	segs, err := plan.CompressStoreSegments(1)
	L := int32(4 + 2)
	if err != nil || len(segs) != 1 || segs[0] != (Segment{DstRow: int32(slot) * L, SrcRow: 0, Count: 3}) {
		t.Fatalf("segments %+v, %v", segs, err)
	}
	kv := make([]float32, 3*16)
	for i := range kv {
		kv[i] = float32(i)
	}
	bias, wgt := make([]float32, 4*16), make([]float32, 16)
	// Wrong row width: refused, named, nothing stored.
	err = plan.CompressStep(&CompressArgs{Layer: 1, KV: F32(kv[:3*8]), Gate: F32(kv[:3*8]), RowWidth: 8,
		PositionBias: bias, NormWeight: wgt, Out: F32(make([]float32, 16)), EntryDim: 16})
	if err == nil || codeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), "row_width") {
		t.Fatalf("wrong row width: %v", err)
	}
	if err := plan.CompressStep(&CompressArgs{Layer: 1, KV: F32(kv), Gate: F32(kv), RowWidth: 16,
		PositionBias: bias, NormWeight: wgt, Out: F32(make([]float32, 16)), EntryDim: 16}); err != nil {
		t.Fatal(err)
	}
	v, err := c.CompressView(1, 0)
	if err != nil || v.Shape[1] != int64(L) || v.Shape[2] != 2 || v.Strides[3] != 1 {
		t.Fatalf("view %+v, %v", v, err)
	}
	// The pool is C memory: its address, reinterpreted (not converted) as a pointer.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&v.Data))
	row := unsafe.Slice((*float32)(unsafe.Add(base, int64(slot)*v.Strides[0]+2*v.Strides[1])), 32)
	for i := 0; i < 16; i++ {
		if row[i] != kv[2*16+i] || row[16+i] != kv[2*16+i] {
			t.Fatalf("ring row 2 value %d: %g / %g, want %g", i, row[i], row[16+i], kv[2*16+i])
		}
	}
	if _, err := c.CompressView(1, 1); err == nil {
		t.Fatal("an HCA layer has no indexer ring")
	}
	if _, err := plan.CompressWindows(5); err == nil {
		t.Fatal("layer 5 does not exist")
	}
}

// The slices the library reads or writes by the layer's sizes are checked
// against the layer here: an EntryDim below d made Out look longer than it is
// (the library wrote past it), a short PositionBias or NormWeight was read past
// its end. Each is refused naming it, with nothing written.
func TestCompressStepChecksSliceLengthsAgainstTheLayer(t *testing.T) {
	c, err := NewCache(compressConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slot, _ := c.AllocSlot()
	plan, _ := c.NewPlan()
	defer plan.Close()
	if err := plan.Build([]Seq{{Slot: slot, SeqlenQ: 8, SeqlenK: 8}}); err != nil {
		t.Fatal(err)
	}
	kv := make([]float32, 8*16) // HCA layer 1: c 4, d 16; entries 0 and 1 close
	for i := range kv {
		kv[i] = 0.01 * float32(i%37)
	}
	bias, wgt := make([]float32, 4*16+4), make([]float32, 16+4)
	for i := range wgt {
		wgt[i] = 1
	}
	buf := make([]float32, 2*16+16)
	for i := range buf {
		buf[i] = -7
	}
	args := func() CompressArgs {
		return CompressArgs{Layer: 1, KV: F32(kv), Gate: F32(kv), RowWidth: 16,
			PositionBias: bias[:4*16], NormWeight: wgt[:16], Out: F32(buf[:2*16]), EntryDim: 16}
	}
	bad := []struct {
		name, named string
		edit        func(*CompressArgs)
	}{
		{"EntryDim d / 2 with Out 1.5 entries long", "EntryDim = 8",
			func(a *CompressArgs) { a.EntryDim, a.Out = 8, F32(buf[:16+8]) }},
		{"short PositionBias", "PositionBias", func(a *CompressArgs) { a.PositionBias = bias[:4*16-1] }},
		{"short NormWeight", "NormWeight", func(a *CompressArgs) { a.NormWeight = wgt[:15] }},
	}
	for _, b := range bad {
		a := args()
		b.edit(&a)
		err := plan.CompressStep(&a)
		if err == nil || codeOf(err) != CodeInvalidArgument || !strings.Contains(err.Error(), b.named) {
			t.Fatalf("%s: %v", b.name, err)
		}
		for i, v := range buf {
			if v != -7 {
				t.Fatalf("%s: out value %d written (%g)", b.name, i, v)
			}
		}
	}
	a := args()
	if err := plan.CompressStep(&a); err != nil {
		t.Fatal(err)
	}
	for i, v := range buf {
		if (i < 2*16) == (v == -7) {
			t.Fatalf("out value %d = %g after the good call", i, v)
		}
	}
}
