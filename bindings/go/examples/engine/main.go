// Command engine drives libswacache the way an inference engine would:
// several sequences through chunked prefill and speculative decode with
// rejected drafts, one of them preempted to a Go store and later resumed
// into another slot. The "model" is a deterministic stand-in that derives
// each token's Q/K/V from (sequence, position, layer), so a resumed sequence
// can be checked against a copy that was never preempted.
package main

import (
	"fmt"
	"log"
	"math"
	"math/rand"
	"sync"

	"github.com/libswacache/libswacache/bindings/go/swacache"
)

const (
	window     = 16
	drafts     = 3 // N: draft tokens per decode step
	chunk      = 16
	layers     = 2
	qHeads     = 8
	headDim    = 64
	decodeStep = 10
)

// mapStore is the engine's own store: a Go map.
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Put(key, blob []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(key)] = blob
	return nil
}

func (s *mapStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[string(key)]; ok {
		return b, nil
	}
	return nil, swacache.ErrNotFound
}

func (s *mapStore) Exists(key []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[string(key)]
	return ok, nil
}

func (s *mapStore) Remove(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(key)]; !ok {
		return swacache.ErrNotFound
	}
	delete(s.m, string(key))
	return nil
}

type sequence struct {
	id     int
	slot   uint32
	prompt int
	next   int // first position of the next step
	input  int // whose inputs this sequence sees (a copy shares its source's)
}

// fill writes the stand-in model's values for (seq, pos, layer, which).
func fill(dst []float32, seq, pos, layer, which int) {
	r := rand.New(rand.NewSource(int64(((seq*4099+pos)*7+layer)*3 + which)))
	for i := range dst {
		dst[i] = float32(r.NormFloat64())
	}
}

// step plans one step of batch (n[i] new tokens each) and runs every layer;
// it returns each sequence's output rows of the last layer.
func step(c *swacache.Cache, p *swacache.Plan, batch []*sequence, n []int) [][]float32 {
	seqs := make([]swacache.Seq, len(batch))
	total := 0
	for i, s := range batch {
		seqs[i] = swacache.Seq{Slot: s.slot, SeqlenQ: int32(n[i]), SeqlenK: int32(s.next + n[i])}
		total += n[i]
	}
	if err := p.Build(seqs); err != nil {
		log.Fatalf("plan: %v", err)
	}
	row := qHeads * headDim
	q := make([]float32, total*row)
	k := make([]float32, total*headDim)
	out := make([]float32, total*row)
	for l := 0; l < layers; l++ {
		t := 0
		for i, s := range batch {
			for j := 0; j < n[i]; j++ {
				fill(q[(t+j)*row:(t+j+1)*row], s.input, s.next+j, l, 0)
				fill(k[(t+j)*headDim:(t+j+1)*headDim], s.input, s.next+j, l, 1)
			}
			t += n[i]
		}
		err := p.Step(&swacache.StepArgs{Layer: uint32(l), Q: swacache.F32(q),
			K: swacache.F32(k), Out: swacache.F32(out)})
		if err != nil {
			log.Fatalf("step layer %d: %v", l, err)
		}
	}
	res := make([][]float32, len(batch))
	t := 0
	for i := range batch {
		res[i] = out[t*row : (t+n[i])*row]
		t += n[i]
	}
	return res
}

func main() {
	cfg := swacache.DefaultConfig()
	cfg.Window, cfg.DraftTokens, cfg.MaxSlots = window, drafts, 8
	cfg.Backend, cfg.NumThreads = swacache.BackendCPU, 1
	l := swacache.DefaultLayerDesc()
	l.QHeads, l.KVHeads, l.HeadDim = qHeads, 1, headDim // MQA, shared K/V, MXFP8
	for i := 0; i < layers; i++ {
		cfg.Layers = append(cfg.Layers, l)
	}
	c, err := swacache.NewCache(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	lay, _ := c.Layout()
	fmt.Printf("libswacache %s: W=%d N=%d R=%d, %d bytes per slot (%d stored)\n",
		swacache.Version(), lay.Window, lay.DraftTokens, lay.RingLen, lay.SlotBytes, lay.StoredBytes)
	if err := c.SetStore(&mapStore{m: map[string][]byte{}}); err != nil {
		log.Fatal(err)
	}
	p, err := c.NewPlan()
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	var seqs []*sequence
	for i, prompt := range []int{40, 7, 23} {
		slot, err := c.AllocSlot()
		if err != nil {
			log.Fatal(err)
		}
		seqs = append(seqs, &sequence{id: i, slot: slot, prompt: prompt, input: i})
	}

	// Chunked prefill: every sequence brings up to `chunk` prompt tokens per step.
	for steps := 0; ; steps++ {
		var batch []*sequence
		var n []int
		for _, s := range seqs {
			if left := s.prompt - s.next; left > 0 {
				batch = append(batch, s)
				n = append(n, min(left, chunk))
			}
		}
		if len(batch) == 0 {
			fmt.Printf("prefill: %d steps\n", steps)
			break
		}
		step(c, p, batch, n)
		info, _ := p.Info()
		fmt.Printf("  prefill step %d: %d tokens, path %v\n", steps, info.NTokens, pathName(info.Path))
		for i, s := range batch {
			s.next += n[i]
		}
	}

	// Speculative decode: N + 1 tokens per sequence, a random number accepted.
	r := rand.New(rand.NewSource(42))
	decode := func(batch []*sequence) [][]float32 {
		n := make([]int, len(batch))
		for i := range n {
			n[i] = drafts + 1
		}
		out := step(c, p, batch, n)
		for _, s := range batch {
			s.next += 1 + r.Intn(drafts+1) // rejected drafts are overwritten next step
		}
		return out
	}
	for i := 0; i < decodeStep/2; i++ {
		decode(seqs)
	}

	// Preempt sequence 1: save it to the Go store and free its slot. A shadow
	// copy (never preempted) will check the resumed sequence.
	pre := seqs[1]
	shadowSlot, _ := c.AllocSlot()
	if err := c.CopySlot(pre.slot, shadowSlot); err != nil {
		log.Fatal(err)
	}
	shadow := &sequence{id: 99, slot: shadowSlot, next: pre.next, input: pre.input}
	key := []byte("request-1")
	saved, _ := c.SlotInfo(pre.slot) // written_end counts the rejected drafts too
	if err := c.Save(pre.slot, key); err != nil {
		log.Fatal(err)
	}
	if err := c.FreeSlot(pre.slot); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("preempted sequence 1 at position %d (slot %d) to the Go store\n", pre.next, pre.slot)
	running := []*sequence{seqs[0], seqs[2]}
	for i := 0; i < decodeStep/2; i++ {
		decode(running)
	}
	// Resume into another slot: take the freed one for someone else first.
	other, _ := c.AllocSlot()
	slot, err := c.AllocSlot()
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Restore(slot, key); err != nil {
		log.Fatal(err)
	}
	info, _ := c.SlotInfo(slot)
	fmt.Printf("resumed sequence 1 into slot %d (was %d): written_end %d, next step at %d\n",
		slot, pre.slot, info.WrittenEnd, pre.next)
	if slot == pre.slot || info.WrittenEnd != saved.WrittenEnd {
		log.Fatalf("resume: slot %d, written_end %d, want %d", slot, info.WrittenEnd, saved.WrittenEnd)
	}
	c.FreeSlot(other)
	pre.slot = slot

	// The resumed sequence and its shadow see the same inputs: their outputs
	// must be identical, bit for bit.
	batch := []*sequence{seqs[0], pre, seqs[2], shadow}
	var worst float64
	for i := 0; i < decodeStep/2; i++ {
		out := decode(batch)
		for j := range out[1] {
			worst = math.Max(worst, math.Abs(float64(out[1][j]-out[3][j])))
		}
		shadow.next = pre.next // the shadow accepts what the resumed one accepted
	}
	if worst != 0 {
		log.Fatalf("resumed sequence differs from its shadow by %g", worst)
	}
	st, _ := c.Stats()
	fmt.Printf("decode done: positions %d, %d, %d; %d layer steps, %d tokens; resumed == shadow\n",
		seqs[0].next, seqs[1].next, seqs[2].next, st.Steps, st.Tokens)
	if ok, err := c.StoreExists(key); err != nil || !ok {
		log.Fatalf("the preempted blob is gone: %v, %v", ok, err)
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func pathName(p swacache.PlanPath) string {
	switch p {
	case swacache.PlanPathRing:
		return "ring-only"
	case swacache.PlanPathStaged:
		return "staged"
	}
	return "none"
}
