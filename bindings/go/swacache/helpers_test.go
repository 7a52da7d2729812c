package swacache

import (
	"math"
	"math/rand"
	"testing"
)

// Two small layers: an MQA layer whose one vector is both K and V, and a GQA
// layer with separate K and V and attention sinks. FP32 rings, so the dense
// reference below sees exactly the keys the library stores.
const (
	tW      = 8 // window
	tN      = 2 // draft tokens
	tD      = 32
	tSlots  = 16
	tLayers = 2
)

func testConfig(format Format) Config {
	cfg := DefaultConfig()
	cfg.Window, cfg.DraftTokens, cfg.MaxSlots = tW, tN, tSlots
	cfg.Backend, cfg.NumThreads = BackendCPU, 1
	mqa := DefaultLayerDesc()
	mqa.QHeads, mqa.KVHeads, mqa.HeadDim, mqa.SharedKV, mqa.KVFormat = 4, 1, tD, true, format
	gqa := mqa
	gqa.QHeads, gqa.KVHeads, gqa.SharedKV, gqa.HasSinks = 4, 2, false, true
	cfg.Layers = []LayerDesc{mqa, gqa}
	return cfg
}

func newTestCache(t testing.TB, format Format) *Cache {
	t.Helper()
	c, err := NewCache(testConfig(format))
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randF32(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func poisonF32(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// bf16 rounds to nearest even (inputs here are finite).
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// refSeq is the dense reference of one sequence: every key and value ever
// written, by absolute position (a later write of a position replaces it,
// as a rejected draft is overwritten), per layer.
type refSeq struct {
	validStart int
	k, v       [tLayers]map[int][]float64 // position -> [Hkv*D]
}

func newRefSeq() *refSeq {
	s := &refSeq{}
	for l := 0; l < tLayers; l++ {
		s.k[l], s.v[l] = map[int][]float64{}, map[int][]float64{}
	}
	return s
}

// attend computes one token's output [Hq*D] at position p of layer l: a
// dense band mask over positions [max(0, v, p-W+1), p], FP64, with sinks.
func (s *refSeq) attend(ld LayerDesc, l int, p int, q []float64, sinks []float32) []float64 {
	lo := p - tW + 1
	if lo < s.validStart {
		lo = s.validStart
	}
	if lo < 0 {
		lo = 0
	}
	d := int(ld.HeadDim)
	hq, hkv := int(ld.QHeads), int(ld.KVHeads)
	scale := 1 / math.Sqrt(float64(d))
	out := make([]float64, hq*d)
	for h := 0; h < hq; h++ {
		g := h / (hq / hkv)
		qh := q[h*d : (h+1)*d]
		m := math.Inf(-1)
		if sinks != nil {
			m = float64(sinks[h])
		}
		z := make([]float64, p-lo+1)
		for j := lo; j <= p; j++ {
			k := s.k[l][j][g*d : (g+1)*d]
			var dot float64
			for i := range qh {
				dot += qh[i] * k[i]
			}
			z[j-lo] = dot * scale
			m = math.Max(m, z[j-lo])
		}
		var den float64
		if sinks != nil {
			den = math.Exp(float64(sinks[h]) - m)
		}
		o := out[h*d : (h+1)*d]
		for j := lo; j <= p; j++ {
			w := math.Exp(z[j-lo] - m)
			den += w
			vv := s.v[l][j][g*d : (g+1)*d]
			for i := range o {
				o[i] += w * vv[i]
			}
		}
		for i := range o {
			o[i] /= den
		}
	}
	return out
}

// relL2 is ||got - want|| / ||want||; NaN in got gives +Inf.
func relL2(got []float32, want []float64) float64 {
	var num, den float64
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) {
			return math.Inf(1)
		}
		num += (g - want[i]) * (g - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}
