package swacache

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
)

// An output of Step that shares memory with an input other than being Q
// itself is refused before the C call. Before the fix, Out one head row
// before Q in a shared buffer returned nil with wrong values (the library
// writes earlier output rows before it reads later query rows).
func TestStepRefusesOverlappingOutputs(t *testing.T) {
	const T, hq, hkv = 4, 4, 2
	qn, kn := T*hq*tD, T*hkv*tD
	run := func(c *Cache, slot uint32, a *StepArgs) error {
		p, err := c.NewPlan()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Build([]Seq{{Slot: slot, SeqlenQ: T, SeqlenK: T}}); err != nil {
			t.Fatal(err)
		}
		return p.Step(a)
	}
	r := rand.New(rand.NewSource(3))
	q, k, v, sinks := randF32(r, qn), randF32(r, kn), randF32(r, kn), randF32(r, hq)

	// Reference: separate buffers, layer 1 (GQA with sinks).
	ref := make([]float32, qn)
	c0 := newTestCache(t, FormatFP32)
	s0, _ := c0.AllocSlot()
	if err := run(c0, s0, &StepArgs{Layer: 1, Q: F32(q), K: F32(k), V: F32(v), Out: F32(ref), Sinks: sinks}); err != nil {
		t.Fatal(err)
	}

	c := newTestCache(t, FormatFP32)
	refused := func(name string, a *StepArgs, want string) {
		t.Helper()
		slot, err := c.AllocSlot()
		if err != nil {
			t.Fatal(err)
		}
		defer c.FreeSlot(slot)
		err = run(c, slot, a)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT naming %q", name, err, want)
		}
	}
	// Out one head row before Q in one buffer.
	buf := make([]float32, qn+tD)
	copy(buf[tD:], q)
	refused("Out shifted over Q", &StepArgs{Layer: 1, Q: F32(buf[tD:]), K: F32(k), V: F32(v),
		Out: F32(buf[:qn]), Sinks: sinks}, "Out overlaps Q")
	// Out over K and V.
	kv := make([]float32, qn+kn)
	copy(kv, k)
	refused("Out over K", &StepArgs{Layer: 1, Q: F32(q), K: F32(kv[:kn]), V: F32(v),
		Out: F32(kv[:qn]), Sinks: sinks}, "Out overlaps K")
	// LSE inside Out, LSE over Sinks.
	out := make([]float32, qn)
	refused("LSE in Out", &StepArgs{Layer: 1, Q: F32(q), K: F32(k), V: F32(v), Out: F32(out),
		Sinks: sinks, LSE: out[:T*hq]}, "LSE overlaps Out")
	sl := make([]float32, T*hq)
	copy(sl, sinks)
	refused("LSE over Sinks", &StepArgs{Layer: 1, Q: F32(q), K: F32(k), V: F32(v), Out: F32(out),
		Sinks: sl[:hq], LSE: sl}, "LSE overlaps Sinks")

	// Out exactly Q (in place) stays allowed and matches the reference.
	inPlace := append([]float32(nil), q...)
	slot, _ := c.AllocSlot()
	if err := run(c, slot, &StepArgs{Layer: 1, Q: F32(inPlace), K: F32(k), V: F32(v), Out: F32(inPlace), Sinks: sinks}); err != nil {
		t.Fatalf("Out = Q: %v", err)
	}
	for i := range ref {
		if inPlace[i] != ref[i] {
			t.Fatalf("Out = Q: element %d is %v, want %v", i, inPlace[i], ref[i])
		}
	}
}
