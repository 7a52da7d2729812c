package swacache

import (
	"math/rand"
	"os"
	"sort"
	"testing"
	"time"
)

// The binding's per-call overhead: the same calls through Go and from a C
// loop (cbaseline.go), on one cache of a DeepSeek-like shape scaled to a
// small CPU: W = 128, one MQA layer of 8 query heads on a shared 128-wide
// MXFP8 vector, 64 sequences of one decode token each (positions 200).
// Run: go test -run XXX -bench . -benchtime 2s ./swacache

const (
	bSeqs = 64
	bHq   = 8
	bD    = 128
	bPos  = 200
)

type benchSetup struct {
	c    *Cache
	p    *Plan
	seqs []Seq
	args StepArgs
}

func newBenchSetup(tb testing.TB) *benchSetup {
	cfg := DefaultConfig()
	cfg.Window, cfg.MaxSlots, cfg.Backend, cfg.NumThreads = 128, bSeqs, BackendCPU, 1
	l := DefaultLayerDesc()
	l.QHeads, l.KVHeads, l.HeadDim, l.SharedKV = bHq, 1, bD, true
	cfg.Layers = []LayerDesc{l}
	c, err := NewCache(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	p, err := c.NewPlan()
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	// Fill every slot up to bPos with one staged prefill.
	pre := make([]Seq, bSeqs)
	for i := range pre {
		s, err := c.AllocSlot()
		if err != nil {
			tb.Fatal(err)
		}
		pre[i] = Seq{Slot: s, SeqlenQ: bPos, SeqlenK: bPos}
	}
	if err := p.Build(pre); err != nil {
		tb.Fatal(err)
	}
	t := bSeqs * bPos
	if err := p.Step(&StepArgs{Q: F32(randF32(r, t*bHq*bD)), K: F32(randF32(r, t*bD)),
		Out: F32(make([]float32, t*bHq*bD))}); err != nil {
		tb.Fatal(err)
	}
	seqs := make([]Seq, bSeqs)
	for i := range seqs {
		seqs[i] = Seq{Slot: pre[i].Slot, SeqlenQ: 1, SeqlenK: bPos + 1}
	}
	if err := p.Build(seqs); err != nil {
		tb.Fatal(err)
	}
	args := StepArgs{Q: F32(randF32(r, bSeqs*bHq*bD)), K: F32(randF32(r, bSeqs*bD)),
		Out: F32(make([]float32, bSeqs*bHq*bD))}
	return &benchSetup{c: c, p: p, seqs: seqs, args: args}
}

func BenchmarkPlanBuild64(b *testing.B) {
	s := newBenchSetup(b)
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := s.p.Build(s.seqs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c", func(b *testing.B) {
		if err := cLoopPlanBuild(s.p, s.seqs, b.N); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkStep64(b *testing.B) {
	s := newBenchSetup(b)
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := s.p.Step(&s.args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c", func(b *testing.B) {
		if err := cLoopStep(s.p, &s.args, b.N); err != nil {
			b.Fatal(err)
		}
	})
}

// TestBindingOverhead times the same calls through Go and from the C loop,
// interleaved (best of several rounds, so that drift on a shared machine
// hits both sides), and reports the binding's share. With
// SWACACHE_GO_BENCH_ASSERT=1 it fails when a step costs 5 % more through Go
// than from C; by default timing is only reported, since a loaded CI machine
// makes any time bound flaky. Skipped under -race and -short.
func TestBindingOverhead(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing test: skipped under -short and -race")
	}
	s := newBenchSetup(t)
	timeit := func(n int, f func()) float64 {
		start := time.Now()
		f()
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	// Each round times Go then C back to back; the medians of the per-round
	// times and of the per-round Go/C ratios are reported.
	median := func(x []float64) float64 {
		sort.Float64s(x)
		return x[len(x)/2]
	}
	const rounds, nBuild, nStep = 41, 500, 5
	var buildGo, buildC, buildR, stepGo, stepC, stepR []float64
	for round := 0; round < rounds; round++ {
		g := timeit(nBuild, func() {
			for i := 0; i < nBuild; i++ {
				s.p.Build(s.seqs)
			}
		})
		c := timeit(nBuild, func() { cLoopPlanBuild(s.p, s.seqs, nBuild) })
		buildGo, buildC, buildR = append(buildGo, g), append(buildC, c), append(buildR, g/c)
		g = timeit(nStep, func() {
			for i := 0; i < nStep; i++ {
				s.p.Step(&s.args)
			}
		})
		c = timeit(nStep, func() { cLoopStep(s.p, &s.args, nStep) })
		stepGo, stepC, stepR = append(stepGo, g), append(stepC, c), append(stepR, g/c)
	}
	bg, bc, br := median(buildGo), median(buildC), median(buildR)
	sg, sc, sr := median(stepGo), median(stepC), median(stepR)
	t.Logf("plan build (64 seqs): go %.0f ns, c %.0f ns; median go/c %+.1f %%", bg, bc, 100*(br-1))
	t.Logf("swa_step (64 seqs):   go %.0f ns, c %.0f ns; median go/c %+.2f %%", sg, sc, 100*(sr-1))
	if os.Getenv("SWACACHE_GO_BENCH_ASSERT") == "1" && sr > 1.05 {
		t.Fatalf("step through Go is %.1f %% slower than from C", 100*(sr-1))
	}
}
