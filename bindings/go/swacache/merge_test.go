package swacache

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

// mergeRef is the merge formula in float64, written out in the test:
// out = (e^(la-m) a + e^(lb-m) b) / (e^(la-m) + e^(lb-m)), lse = m + ln(sum),
// with an empty part (LSE -Inf) weighing nothing.
func mergeRef(a, b []float64, la, lb float64) ([]float64, float64) {
	out := make([]float64, len(a))
	if math.IsInf(la, -1) && math.IsInf(lb, -1) {
		return out, math.Inf(-1)
	}
	m := math.Max(la, lb)
	wa, wb := math.Exp(la-m), math.Exp(lb-m)
	for i := range a {
		x := 0.0
		if wa > 0 {
			x += wa * a[i]
		}
		if wb > 0 {
			x += wb * b[i]
		}
		out[i] = x / (wa + wb)
	}
	return out, m + math.Log(wa+wb)
}

func TestAttentionMerge(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	r := rand.New(rand.NewSource(11))
	const rows, d = 37, 64
	a, b := randF32(r, rows*d), randF32(r, rows*d)
	la, lb := make([]float32, rows), make([]float32, rows)
	for i := range la {
		la[i], lb[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64()*4)
	}
	la[3] = float32(math.Inf(-1)) // Part A empty: out is B's row.
	lb[5] = float32(math.Inf(-1))
	la[7], lb[7] = float32(math.Inf(-1)), float32(math.Inf(-1)) // Both empty: 0 and -Inf.
	la[9], lb[9] = 80, -80                                      // A far heavier: no overflow.
	for i := 0; i < d; i++ {
		a[3*d+i] = float32(math.NaN()) // Never read: weight 0 from a -Inf LSE.
	}
	want := func(row int) ([]float64, float64) {
		fa, fb := make([]float64, d), make([]float64, d)
		for i := 0; i < d; i++ {
			fa[i], fb[i] = float64(a[row*d+i]), float64(b[row*d+i])
		}
		return mergeRef(fa, fb, float64(la[row]), float64(lb[row]))
	}

	out, lse := poisonF32(rows*d), poisonF32(rows)
	if err := c.AttentionMerge(&MergeArgs{HeadDim: d, OutA: F32(a), LSEA: la, OutB: F32(b), LSEB: lb,
		Out: F32(out), LSE: lse}); err != nil {
		t.Fatal(err)
	}
	for row := 0; row < rows; row++ {
		wo, wl := want(row)
		if math.IsInf(wl, -1) != math.IsInf(float64(lse[row]), -1) ||
			(!math.IsInf(wl, -1) && math.Abs(float64(lse[row])-wl) > 1e-5*math.Max(1, math.Abs(wl))) {
			t.Fatalf("row %d: lse %v, want %v", row, lse[row], wl)
		}
		for i := 0; i < d; i++ {
			if g := float64(out[row*d+i]); math.Abs(g-wo[i]) > 1e-5*math.Max(1, math.Abs(wo[i])) {
				t.Fatalf("row %d [%d]: %v, want %v", row, i, g, wo[i])
			}
		}
	}

	// BF16 in and out, merged in place into A (Out is OutA, LSE is LSEA).
	ab, bb := make([]uint16, rows*d), make([]uint16, rows*d)
	for i := range ab {
		ab[i], bb[i] = bf16(a[i]), bf16(b[i])
		a[i], b[i] = fromBF16(ab[i]), fromBF16(bb[i])
	}
	wants := make([][]float64, rows)
	for row := range wants {
		wants[row], _ = want(row)
	}
	if err := c.AttentionMerge(&MergeArgs{HeadDim: d, OutA: BF16(ab), LSEA: la, OutB: BF16(bb), LSEB: lb,
		Out: BF16(ab), LSE: la}); err != nil {
		t.Fatal(err)
	}
	for row := 0; row < rows; row++ {
		for i := 0; i < d; i++ {
			if g := float64(fromBF16(ab[row*d+i])); math.Abs(g-wants[row][i]) > math.Abs(wants[row][i])/128+1e-6 {
				t.Fatalf("BF16 row %d [%d]: %v, want %v", row, i, g, wants[row][i])
			}
		}
	}

	// Every length, dtype and overlap is checked in Go; the library is never reached.
	f := func(m MergeArgs) MergeArgs { return m }
	base := MergeArgs{HeadDim: d, OutA: F32(a), LSEA: la, OutB: F32(b), LSEB: lb, Out: F32(out), LSE: lse}
	bad := map[string]MergeArgs{}
	m := f(base)
	m.Out = F32(out[1:])
	bad["short Out"] = m
	m = f(base)
	m.OutB = F32(b[:len(b)-d])
	bad["short OutB"] = m
	m = f(base)
	m.LSEB = lb[1:]
	bad["short LSEB"] = m
	m = f(base)
	m.LSE = lse[:3]
	bad["short LSE"] = m
	m = f(base)
	m.OutB = BF16(bb)
	bad["mixed dtypes"] = m
	m = f(base)
	m.HeadDim = 0
	bad["HeadDim 0"] = m
	m = f(base)
	m.Out = Tensor{F32: out, BF16: bb}
	bad["both dtypes"] = m
	big := make([]float32, rows*d+d)
	m = f(base)
	copy(big, a)
	m.OutA, m.Out = F32(big[:rows*d]), F32(big[d:])
	bad["Out overlaps OutA"] = m
	m = f(base)
	m.LSE = out[:rows]
	bad["LSE inside Out"] = m
	for name, m := range bad {
		m := m
		if err := c.AttentionMerge(&m); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := c.AttentionMerge(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil args: %v", err)
	}
	if err := c.AttentionMerge(&MergeArgs{HeadDim: d}); err != nil {
		t.Fatalf("zero rows: %v", err)
	}
	c.Close()
	if err := c.AttentionMerge(&base); !errors.Is(err, ErrClosed) {
		t.Fatalf("merge on a closed cache: %v", err)
	}
}
