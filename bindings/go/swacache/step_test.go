package swacache

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

// seqState is one sequence driven by the tests: its slot, its dense
// reference and the position its next step starts at.
type seqState struct {
	slot uint32
	ref  *refSeq
	next int
}

// stepAll plans one step of seqs (lens[i] new tokens each, from s.next),
// runs every layer with fresh random inputs, and checks each output against
// the dense reference. It returns the worst relative L2 error.
func stepAll(t testing.TB, c *Cache, p *Plan, r *rand.Rand, seqs []*seqState, lens []int, bf bool) float64 {
	t.Helper()
	batch := make([]Seq, len(seqs))
	total := 0
	for i, s := range seqs {
		batch[i] = Seq{Slot: s.slot, SeqlenQ: int32(lens[i]), SeqlenK: int32(s.next + lens[i])}
		total += lens[i]
	}
	if err := p.Build(batch); err != nil {
		t.Fatalf("Build(%v): %v", batch, err)
	}
	wantPath := PlanPathRing
	for _, n := range lens {
		if n > tW+tN+1-tW+1 { // R - W + 1 with the default R = W + N + 1
			wantPath = PlanPathStaged
		}
	}
	if info, err := p.Info(); err != nil || info.Path != wantPath || int(info.NTokens) != total {
		t.Fatalf("Info() = %+v, %v; want path %d, %d tokens", info, err, wantPath, total)
	}
	worst := 0.0
	for l, ld := range c.s.layers {
		d, hq, hkv := int(ld.HeadDim), int(ld.QHeads), int(ld.KVHeads)
		q := randF32(r, total*hq*d)
		k := randF32(r, total*hkv*d)
		var v []float32
		if !ld.SharedKV {
			v = randF32(r, total*hkv*d)
		}
		var sinks []float32
		if ld.HasSinks {
			sinks = randF32(r, hq)
		}
		args := StepArgs{Layer: uint32(l), Sinks: sinks}
		var qb, kb, vb, ob []uint16
		if bf {
			qb, kb = make([]uint16, len(q)), make([]uint16, len(k))
			for i := range q {
				qb[i] = bf16(q[i])
				q[i] = fromBF16(qb[i])
			}
			for i := range k {
				kb[i] = bf16(k[i])
				k[i] = fromBF16(kb[i])
			}
			if v != nil {
				vb = make([]uint16, len(v))
				for i := range v {
					vb[i] = bf16(v[i])
					v[i] = fromBF16(vb[i])
				}
				args.V = BF16(vb)
			}
			ob = make([]uint16, total*hq*d)
			for i := range ob {
				ob[i] = 0x7fc0 // NaN
			}
			args.Q, args.K, args.Out = BF16(qb), BF16(kb), BF16(ob)
		} else {
			args.Q, args.K, args.Out = F32(q), F32(k), F32(poisonF32(total*hq*d))
			if v != nil {
				args.V = F32(v)
			}
		}
		// The reference: write every new key/value first, then attend.
		tok := 0
		for i, s := range seqs {
			for j := 0; j < lens[i]; j++ {
				kk := make([]float64, hkv*d)
				vv := make([]float64, hkv*d)
				for e := range kk {
					kk[e] = float64(k[(tok+j)*hkv*d+e])
					if v != nil {
						vv[e] = float64(v[(tok+j)*hkv*d+e])
					} else {
						vv[e] = kk[e]
					}
				}
				s.ref.k[l][s.next+j], s.ref.v[l][s.next+j] = kk, vv
			}
			tok += lens[i]
		}
		if err := p.Step(&args); err != nil {
			t.Fatalf("Step(layer %d): %v", l, err)
		}
		tok = 0
		for i, s := range seqs {
			for j := 0; j < lens[i]; j++ {
				qq := make([]float64, hq*d)
				for e := range qq {
					qq[e] = float64(q[(tok+j)*hq*d+e])
				}
				want := s.ref.attend(ld, l, s.next+j, qq, sinks)
				got := make([]float32, hq*d)
				if bf {
					for e := range got {
						got[e] = fromBF16(ob[(tok+j)*hq*d+e])
					}
				} else {
					copy(got, args.Out.F32[(tok+j)*hq*d:])
				}
				worst = math.Max(worst, relL2(got, want))
			}
			tok += lens[i]
		}
	}
	return worst
}

// decodeLoop drives three sequences through a chunked prefill (one chunk
// long enough for the staged path) and speculative decode steps of N+1
// tokens with random rejections.
func decodeLoop(t *testing.T, format Format, bf bool, budget float64) {
	c := newTestCache(t, format)
	p, err := c.NewPlan()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := rand.New(rand.NewSource(7))
	var seqs []*seqState
	for i := 0; i < 3; i++ {
		slot, err := c.AllocSlot()
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, &seqState{slot: slot, ref: newRefSeq()})
	}
	worst := 0.0
	// Chunked prefill: 13 tokens (staged), then 3 and 4 (ring-only).
	for _, lens := range [][]int{{13, 2, 5}, {3, 4, 1}, {4, 1, 3}} {
		worst = math.Max(worst, stepAll(t, c, p, r, seqs, lens, bf))
		for i, s := range seqs {
			s.next += lens[i]
		}
	}
	for step := 0; step < 12; step++ {
		lens := []int{tN + 1, tN + 1, tN + 1}
		worst = math.Max(worst, stepAll(t, c, p, r, seqs, lens, bf))
		for _, s := range seqs {
			s.next += 1 + r.Intn(tN+1) // The verified token plus 0..N accepted drafts.
		}
	}
	if worst > budget {
		t.Fatalf("worst relative L2 error %.3g > budget %.3g", worst, budget)
	}
	t.Logf("worst relative L2 error %.3g (budget %.3g)", worst, budget)
	st, err := c.Stats()
	if err != nil || st.Steps != 2*15 || st.SlotsInUse != 3 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
}

func TestDecodeLoopFP32MatchesDenseReference(t *testing.T) {
	decodeLoop(t, FormatFP32, false, 1e-5)
}

func TestDecodeLoopBF16MatchesDenseReference(t *testing.T) {
	decodeLoop(t, FormatBF16, true, 1e-2)
}

func TestStepLengthChecks(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	p, _ := c.NewPlan()
	slot, _ := c.AllocSlot()
	const T = 3
	good := func(layer uint32) StepArgs {
		ld := c.s.layers[layer]
		a := StepArgs{Layer: layer,
			Q:   F32(make([]float32, T*int(ld.QHeads)*tD)),
			K:   F32(make([]float32, T*int(ld.KVHeads)*tD)),
			Out: F32(make([]float32, T*int(ld.QHeads)*tD))}
		if !ld.SharedKV {
			a.V = F32(make([]float32, T*int(ld.KVHeads)*tD))
		}
		if ld.HasSinks {
			a.Sinks = make([]float32, ld.QHeads)
		}
		return a
	}
	// Not built: the library refuses without reading any tensor.
	a := good(0)
	if err := p.Step(&a); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("step of an unbuilt plan: %v", err)
	}
	if err := p.Build([]Seq{{Slot: slot, SeqlenQ: T, SeqlenK: T}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(a *StepArgs)
		want error
	}{
		{"nil args", nil, ErrInvalidArgument},
		{"short Q", func(a *StepArgs) { a.Q.F32 = a.Q.F32[1:] }, ErrInvalidArgument},
		{"long K", func(a *StepArgs) { a.K.F32 = append(a.K.F32, 0) }, ErrInvalidArgument},
		{"missing Out", func(a *StepArgs) { a.Out = Tensor{} }, ErrInvalidArgument},
		{"V on shared layer", func(a *StepArgs) { a.V = F32(make([]float32, T*tD)) }, ErrInvalidArgument},
		{"both dtypes", func(a *StepArgs) { a.Q.BF16 = []uint16{1} }, ErrInvalidArgument},
		{"sinks on a layer without", func(a *StepArgs) { a.Sinks = make([]float32, 4) }, ErrInvalidArgument},
		{"layer out of range", func(a *StepArgs) { a.Layer = 7 }, ErrOutOfRange},
		{"negative scale", func(a *StepArgs) { a.SoftmaxScale = -1 }, ErrInvalidArgument},
	}
	for _, tc := range cases {
		var err error
		if tc.edit == nil {
			err = p.Step(nil)
		} else {
			a := good(0)
			tc.edit(&a)
			err = p.Step(&a)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(a *StepArgs)
	}{
		{"missing V", func(a *StepArgs) { a.V = Tensor{} }},
		{"missing sinks", func(a *StepArgs) { a.Sinks = nil }},
		{"short sinks", func(a *StepArgs) { a.Sinks = a.Sinks[:2] }},
		{"V dtype differs from K", func(a *StepArgs) { a.V = BF16(make([]uint16, len(a.V.F32))) }},
	} {
		a := good(1)
		tc.edit(&a)
		if err := p.Step(&a); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
	// Nothing ran: the plan can still be cancelled.
	if info, _ := p.Info(); info.Executed {
		t.Fatal("a refused step marked the plan executed")
	}
	a = good(0)
	if err := p.Step(&a); err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("cancel after a step: %v", err)
	}
}

func TestEmptyStep(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	p, _ := c.NewPlan()
	if err := p.Build(nil); err != nil {
		t.Fatal(err)
	}
	a := StepArgs{Layer: 0, Q: F32([]float32{}), K: F32([]float32{}), Out: F32([]float32{})}
	if err := p.Step(&a); err != nil {
		t.Fatalf("empty step: %v", err)
	}
}
