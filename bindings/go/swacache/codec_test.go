package swacache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"testing"
)

func TestCodec(t *testing.T) {
	if p := CodecCPUPath(); p != "avx512" && p != "avx2" && p != "scalar" {
		t.Fatalf("CodecCPUPath() = %q", p)
	}
	fp32, err := AttentionCPUPath(DtypeFP32)
	if err != nil || (fp32 != "avx512_wide" && fp32 != "avx512" && fp32 != "avx2_fma" && fp32 != "portable") {
		t.Fatalf("AttentionCPUPath(FP32) = %q, %v", fp32, err)
	}
	if p, err := AttentionCPUPath(DtypeBF16); err != nil || (p != "amx_bf16" && p != "avx512_bf16" && p != fp32) {
		t.Fatalf("AttentionCPUPath(BF16) = %q, %v", p, err)
	}
	if _, err := AttentionCPUPath(Dtype(9)); err == nil {
		t.Fatal("AttentionCPUPath(9) succeeded")
	}
	for f, want := range map[Format]uint32{FormatMXFP8: 64 + 2, FormatBF16: 128, FormatFP32: 256} {
		if n, err := FormatVectorBytes(f, 64); err != nil || n != want {
			t.Fatalf("FormatVectorBytes(%d, 64) = %d, %v", f, n, err)
		}
	}
	if _, err := FormatVectorBytes(FormatMXFP8, 33); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("dim 33: %v", err)
	}
	if _, err := FormatVectorBytes(Format(9), 32); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown format: %v", err)
	}
	r := rand.New(rand.NewSource(2))
	const dim, n = 64, 5
	src := randF32(r, n*dim)

	// FP32 stores the values as they are; BF16 rounds to nearest even.
	raw := make([]byte, n*dim*4)
	if _, err := Encode(FormatFP32, ScaleCeil, F32(src), dim, raw); err != nil {
		t.Fatal(err)
	}
	for i, x := range src {
		if binary.LittleEndian.Uint32(raw[4*i:]) != math.Float32bits(x) {
			t.Fatalf("FP32 element %d", i)
		}
	}
	half := make([]byte, n*dim*2)
	if _, err := Encode(FormatBF16, ScaleCeil, F32(src), dim, half); err != nil {
		t.Fatal(err)
	}
	for i, x := range src {
		if binary.LittleEndian.Uint16(half[2*i:]) != bf16(x) {
			t.Fatalf("BF16 element %d", i)
		}
	}

	// MXFP8: the round trip keeps E4M3's 3 mantissa bits (relative error
	// <= 2^-4 per element above the block's subnormal range).
	codes := make([]byte, n*(dim+dim/32))
	src[7] = float32(math.Inf(1))
	nf, err := Encode(FormatMXFP8, ScaleCeil, F32(src), dim, codes)
	if err != nil || nf != 1 {
		t.Fatalf("Encode MXFP8: %d non-finite blocks, %v", nf, err)
	}
	back := make([]float32, n*dim)
	nf, err = Decode(FormatMXFP8, codes, dim, F32(back))
	if err != nil || nf != 1 {
		t.Fatalf("Decode MXFP8: %d non-finite blocks, %v", nf, err)
	}
	for i := range src {
		if i < 32 {
			if !math.IsNaN(float64(back[i])) {
				t.Fatalf("element %d of the Inf block decoded to %v", i, back[i])
			}
			continue
		}
		if d := math.Abs(float64(back[i] - src[i])); d > math.Abs(float64(src[i]))/16+1.0/64 {
			t.Fatalf("element %d: %v -> %v", i, src[i], back[i])
		}
	}
	// BF16 output of the decode, and BF16 input of the encode.
	backBF := make([]uint16, n*dim)
	if _, err := Decode(FormatMXFP8, codes, dim, BF16(backBF)); err != nil {
		t.Fatal(err)
	}
	if backBF[40] != bf16(back[40]) {
		t.Fatalf("BF16 decode %x, want %x", backBF[40], bf16(back[40]))
	}
	if _, err := Encode(FormatMXFP8, ScaleFloor, BF16(backBF[dim:]), dim, codes[:(n-1)*(dim+2)]); err != nil {
		t.Fatal(err)
	}

	// Lengths are checked in Go; enums and dims by the library.
	if _, err := Encode(FormatMXFP8, ScaleCeil, F32(src), dim, codes[1:]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short dst: %v", err)
	}
	if _, err := Encode(FormatMXFP8, ScaleCeil, F32(src[1:]), dim, codes); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("partial vector: %v", err)
	}
	if _, err := Decode(FormatMXFP8, codes, dim, F32(back[dim:])); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long src: %v", err)
	}
	if _, err := Encode(FormatMXFP8, ScaleMode(7), F32(src), dim, codes); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown scale mode: %v", err)
	}
	if _, err := Encode(FormatMXFP8, ScaleCeil, Tensor{F32: src, BF16: backBF}, dim, codes); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("both dtypes: %v", err)
	}
	if _, err := Encode(FormatMXFP8, ScaleCeil, F32([]float32{}), dim, []byte{}); err != nil {
		t.Fatalf("no vectors: %v", err)
	}
}

func TestProject(t *testing.T) {
	c := newTestCache(t, FormatFP32)
	r := rand.New(rand.NewSource(4))
	const T, K, Q, KV = 3, 48, 16, 8
	hidden := make([]uint16, T*K)
	weight := make([]uint16, (Q+KV)*K) // [Q+KV, K]: WeightOutIn
	for i := range hidden {
		hidden[i] = bf16(float32(r.NormFloat64()))
	}
	for i := range weight {
		weight[i] = bf16(float32(r.NormFloat64()))
	}
	out := poisonF32(T * (Q + KV))
	a := &ProjectArgs{Hidden: hidden, Weight: weight, Out: F32(out), NTokens: T, HiddenDim: K, QDim: Q, KVDim: KV}
	if err := c.Project(a); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, T*(Q+KV))
	for i := 0; i < T; i++ {
		for j := 0; j < Q+KV; j++ {
			for k := 0; k < K; k++ {
				want[i*(Q+KV)+j] += float64(fromBF16(hidden[i*K+k])) * float64(fromBF16(weight[j*K+k]))
			}
		}
	}
	if e := relL2(out, want); e > 1e-5 {
		t.Fatalf("projection error %.3g", e)
	}
	bad := *a
	bad.Weight = weight[1:]
	if err := c.Project(&bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short weight: %v", err)
	}
	bad = *a
	bad.NTokens = -1
	if err := c.Project(&bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative n_tokens: %v", err)
	}
	bad = *a
	bad.WeightLayout = 5
	if err := c.Project(&bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown layout: %v", err)
	}
	if err := c.Project(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil args: %v", err)
	}
	c.Close()
	if err := c.Project(a); !errors.Is(err, ErrClosed) {
		t.Fatalf("Project after Close: %v", err)
	}
}

// The MXFP8 shorthands give the generic codec's bytes, round-trip within
// E4M3's precision, and check lengths in Go.
func TestMXFP8Shorthands(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const dim, n = 96, 4
	src := randF32(r, n*dim)
	src[40] = float32(math.NaN())
	for _, mode := range []ScaleMode{ScaleCeil, ScaleFloor} {
		short, long := make([]byte, n*(dim+dim/32)), make([]byte, n*(dim+dim/32))
		for i := range short {
			short[i], long[i] = 0xA5, 0x5A // Poison: every byte must be written.
		}
		nf, err := EncodeMXFP8(mode, F32(src), dim, short)
		if err != nil || nf != 1 {
			t.Fatalf("EncodeMXFP8 mode %d: %d non-finite blocks, %v", mode, nf, err)
		}
		if _, err := Encode(FormatMXFP8, mode, F32(src), dim, long); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(short, long) {
			t.Fatalf("mode %d: EncodeMXFP8 and Encode(FormatMXFP8) differ", mode)
		}
		back := poisonF32(n * dim)
		if nf, err := DecodeMXFP8(short, dim, F32(back)); err != nil || nf != 1 {
			t.Fatalf("DecodeMXFP8: %d non-finite blocks, %v", nf, err)
		}
		for i := range src {
			if i >= 32 && i < 64 {
				if !math.IsNaN(float64(back[i])) {
					t.Fatalf("element %d of the NaN block decoded to %v", i, back[i])
				}
				continue
			}
			// Ceil clips nothing; floor may saturate the block's largest value at 448 * 2^e.
			if d := math.Abs(float64(back[i] - src[i])); d > math.Abs(float64(src[i]))/8+1.0/64 {
				t.Fatalf("mode %d element %d: %v -> %v", mode, i, src[i], back[i])
			}
		}
		backBF := make([]uint16, n*dim)
		if _, err := DecodeMXFP8(short, dim, BF16(backBF)); err != nil {
			t.Fatal(err)
		}
		if backBF[70] != bf16(back[70]) {
			t.Fatalf("BF16 decode %x, want %x", backBF[70], bf16(back[70]))
		}
	}
	codes := make([]byte, n*(dim+dim/32))
	if _, err := EncodeMXFP8(ScaleCeil, F32(src), dim, codes[1:]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short dst: %v", err)
	}
	if _, err := DecodeMXFP8(codes[:len(codes)-1], dim, F32(src)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short src: %v", err)
	}
	if _, err := EncodeMXFP8(ScaleCeil, F32(src[:33]), 33, codes[:34]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("dim 33: %v", err)
	}
}
