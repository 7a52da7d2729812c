package swacache

// #include "swacache.h"
import "C"

// Format is the storage format of a layer's ring (swa_format_t).
type Format uint32

// Ring storage formats.
const (
	FormatMXFP8 Format = 0 // D E4M3 codes then D/32 E8M0 scales.
	FormatBF16  Format = 1 // 2D bytes.
	FormatFP32  Format = 2 // 4D bytes (debug and reference).
	// FormatFP8DsMla is DeepSeek-V4's 584-byte record (dim 512): 448 E4M3 NoPE
	// codes, 64 BF16 RoPE dims, 7 UE8M0 scales and a pad byte.
	FormatFP8DsMla Format = 3
)

// Dtype is the element type of a tensor exchanged with the library (swa_dtype_t).
type Dtype uint32

// Tensor element types.
const (
	DtypeFP32 Dtype = 0 // IEEE binary32 ([]float32).
	DtypeBF16 Dtype = 1 // bfloat16 bits ([]uint16).
)

// ScaleMode selects how an MXFP8 block's scale is chosen (swa_scale_mode_t).
type ScaleMode uint32

// MXFP8 scale rules.
const (
	ScaleCeil  ScaleMode = 0 // Smallest power of two that clips nothing (default).
	ScaleFloor ScaleMode = 1 // OCP rule; large elements saturate.
)

// LayerRole says whether a layer's ring is persisted (swa_layer_role_t).
type LayerRole uint32

// Layer roles.
const (
	LayerStored  LayerRole = 0 // Part of the stored (persisted) region.
	LayerDropped LayerRole = 1 // Kept for decoding, never persisted.
)

// Backend selects where the slot pool lives (swa_backend_t).
type Backend uint32

// Backends. This binding passes host slices to Step, so it runs steps only
// on caches whose pool is host memory (the CPU backend).
const (
	BackendAuto Backend = 0 // CUDA when built with it and a device exists, else CPU.
	BackendCPU  Backend = 1 // Host memory, CPU kernels.
	BackendCUDA Backend = 2 // Device memory, CUDA kernels.
)

// IndexPad is what fills the unused tail of a decode index row (swa_index_pad_t).
type IndexPad uint32

// Decode index padding.
const (
	IndexPadNeg1    IndexPad = 0 // -1 (default).
	IndexPadLastRow IndexPad = 1 // The token's own ring row.
)

// PlanPath is the execution path of a built plan (swa_plan_path_t).
type PlanPath uint32

// Plan paths.
const (
	PlanPathNone   PlanPath = 0 // Not built, or cancelled.
	PlanPathRing   PlanPath = 1 // Ring-only.
	PlanPathStaged PlanPath = 2 // Staged.
)

// LayerDesc describes one SWA layer (swa_layer_desc_t). Start from
// DefaultLayerDesc.
type LayerDesc struct {
	Role               LayerRole // Stored or dropped.
	QHeads             uint32    // Query heads Hq, a multiple of KVHeads.
	KVHeads            uint32    // KV heads Hkv.
	HeadDim            uint32    // D, a multiple of 32 for MXFP8.
	SharedKV           bool      // One vector is both K and V (MQA/latent).
	KVFormat           Format    // Ring storage format.
	CompressRatio      uint32    // c of the compression state; 0 = none.
	CompressEntryBytes uint32    // Bytes of one compression entry.
	RopeTheta          float32   // RoPE base (used when RopeStyle is not RopeNone).
	RopeDims           uint32    // Rotary dims n (even).
	HasSinks           bool      // The layer has per-head attention sinks.
	// RopeStyle rotates q and the new keys inside the step (RopeNone: off).
	RopeStyle                    RopeStyle
	RopeFirstDim                 uint32  // First rotary dim of each head.
	RopeYarnFactor               float32 // YaRN context factor; 0 or 1 = plain RoPE.
	RopeYarnOriginalMaxPositions uint32  // YaRN: pre-extension context length.
	RopeYarnBetaFast             float32 // YaRN: high-frequency boundary.
	RopeYarnBetaSlow             float32 // YaRN: low-frequency boundary.
	RopeYarnTruncate             bool    // YaRN: round the boundary dims.
	RopeAttentionFactor          float32 // Multiplies cos and sin; 0 = the default.
	RopeDerotateOutput           bool    // Rotate the output's rotary dims back.
	LogitSoftcap                 float32 // Logit soft-cap; 0 = off.
	SoftmaxScale                 float32 // The layer's softmax scale; 0 = 1/sqrt(HeadDim); a step's non-zero one wins.
	// The typed compressor (DeepSeek-V4 HCA/CSA; docs/semantics.md "Compression
	// state"): CompressRatio is its rate, CompressEntryBytes stays 0.
	CompressKind      CompressKind
	CompressHeadDim   uint32 // d of the entries; HCA rows are d wide, CSA rows 2d.
	CompressRopeDims  uint32 // Trailing dims of each entry rotated at w * c; 0 = none.
	CompressRowFormat Format // Storage of the buffered rows: FormatFP32 or FormatBF16.
	IndexHeadDim      uint32 // CSA: the Lightning Indexer's compressor width; 0 = none.
}

// CompressKind is what a layer's compression region holds (swa_compress_kind_t).
type CompressKind uint32

// CompressKind values.
const (
	CompressOpaque CompressKind = 0 // Entries the engine packs itself.
	CompressHCA    CompressKind = 1 // DeepSeek-V4 HCA: non-overlapping windows.
	CompressCSA    CompressKind = 2 // DeepSeek-V4 CSA: windows overlapping by one stride (Ca | Cb rows).
)

// RopeStyle is how a layer's rotary dims pair up (swa_rope_style_t).
type RopeStyle uint32

// RopeStyle values.
const (
	RopeNone RopeStyle = 0 // No rotation inside the step.
	RopeNeox RopeStyle = 1 // Dim i pairs with dim i + n/2 of the rotary slice.
	RopeGptj RopeStyle = 2 // Dims 2i and 2i + 1 pair up.
)

// DefaultLayerDesc returns the defaults of swa_layer_desc_init(): 64 query
// heads on one shared 512-wide MXFP8 vector. Thread-safe.
func DefaultLayerDesc() LayerDesc {
	var d C.swa_layer_desc_t
	C.swa_layer_desc_init(&d)
	return LayerDesc{
		Role: LayerRole(d.role), QHeads: uint32(d.q_heads), KVHeads: uint32(d.kv_heads),
		HeadDim: uint32(d.head_dim), SharedKV: d.shared_kv != 0, KVFormat: Format(d.kv_format),
		CompressRatio: uint32(d.compress_ratio), CompressEntryBytes: uint32(d.compress_entry_bytes),
		RopeTheta: float32(d.rope_theta), RopeDims: uint32(d.rope_dims), HasSinks: d.has_sinks != 0,
		RopeStyle: RopeStyle(d.rope_style), RopeFirstDim: uint32(d.rope_first_dim),
		RopeYarnFactor:               float32(d.rope_yarn_factor),
		RopeYarnOriginalMaxPositions: uint32(d.rope_yarn_original_max_positions),
		RopeYarnBetaFast:             float32(d.rope_yarn_beta_fast), RopeYarnBetaSlow: float32(d.rope_yarn_beta_slow),
		RopeYarnTruncate: d.rope_yarn_truncate != 0, RopeAttentionFactor: float32(d.rope_attention_factor),
		RopeDerotateOutput: d.rope_derotate_output != 0, LogitSoftcap: float32(d.logit_softcap),
		SoftmaxScale: float32(d.softmax_scale),
		CompressKind: CompressKind(d.compress_kind), CompressHeadDim: uint32(d.compress_head_dim),
		CompressRopeDims: uint32(d.compress_rope_dims), CompressRowFormat: Format(d.compress_row_format),
		IndexHeadDim: uint32(d.index_head_dim),
	}
}

func (l *LayerDesc) toC(d *C.swa_layer_desc_t) {
	C.swa_layer_desc_init(d)
	d.role = C.swa_layer_role_t(l.Role)
	d.q_heads = C.uint32_t(l.QHeads)
	d.kv_heads = C.uint32_t(l.KVHeads)
	d.head_dim = C.uint32_t(l.HeadDim)
	d.shared_kv = cbool(l.SharedKV)
	d.kv_format = C.swa_format_t(l.KVFormat)
	d.compress_ratio = C.uint32_t(l.CompressRatio)
	d.compress_entry_bytes = C.uint32_t(l.CompressEntryBytes)
	d.compress_kind = C.swa_compress_kind_t(l.CompressKind)
	d.compress_head_dim = C.uint32_t(l.CompressHeadDim)
	d.compress_rope_dims = C.uint32_t(l.CompressRopeDims)
	d.compress_row_format = C.swa_format_t(l.CompressRowFormat)
	d.index_head_dim = C.uint32_t(l.IndexHeadDim)
	d.rope_theta = C.float(l.RopeTheta)
	d.rope_dims = C.uint32_t(l.RopeDims)
	d.has_sinks = cbool(l.HasSinks)
	d.rope_style = C.swa_rope_style_t(l.RopeStyle)
	d.rope_first_dim = C.uint32_t(l.RopeFirstDim)
	d.rope_yarn_factor = C.float(l.RopeYarnFactor)
	d.rope_yarn_original_max_positions = C.uint32_t(l.RopeYarnOriginalMaxPositions)
	d.rope_yarn_beta_fast = C.float(l.RopeYarnBetaFast)
	d.rope_yarn_beta_slow = C.float(l.RopeYarnBetaSlow)
	d.rope_yarn_truncate = cbool(l.RopeYarnTruncate)
	d.rope_attention_factor = C.float(l.RopeAttentionFactor)
	d.rope_derotate_output = cbool(l.RopeDerotateOutput)
	d.logit_softcap = C.float(l.LogitSoftcap)
	d.softmax_scale = C.float(l.SoftmaxScale)
}

func cbool(b bool) C.uint32_t {
	if b {
		return 1
	}
	return 0
}

// Config is the configuration of one cache (swa_config_t). Start from
// DefaultConfig. A caller-provided pool is not offered: C must never keep
// Go memory, so the library always allocates the pool itself.
type Config struct {
	Window      uint32      // W, keys visible to a query including itself.
	DraftTokens uint32      // N, speculative draft tokens per step.
	RingLen     uint32      // R; 0 = W + N + 1.
	Alignment   uint32      // Region alignment in bytes.
	MaxSlots    uint32      // State slots in the pool.
	Backend     Backend     // Where the pool lives.
	Device      int32       // CUDA device ordinal.
	ScaleMode   ScaleMode   // MXFP8 scale rule.
	NumThreads  uint32      // CPU backend threads; 0 = hardware threads.
	Layers      []LayerDesc // Layers in model order; the index is the layer id.
	// StoreSecret turns on authenticated blobs (nil = none; else 16 ... 1024
	// bytes): every blob carries an HMAC-SHA-256 tag, and a restore refuses one
	// without a valid tag (ErrDataLoss). It authenticates, it does not encrypt
	// (docs/store.md, "Threat model"). NewCache copies it.
	StoreSecret []byte
	// StoreNamespace is prefixed to every store key of the cache (nil = none;
	// else 1 ... 256 bytes), so caches with different namespaces never see
	// each other's blobs in a shared store.
	StoreNamespace []byte
}

// DefaultConfig returns the defaults of swa_config_init() (no layers).
// Thread-safe.
func DefaultConfig() Config {
	var c C.swa_config_t
	C.swa_config_init(&c)
	return Config{
		Window: uint32(c.window), DraftTokens: uint32(c.draft_tokens), RingLen: uint32(c.ring_len),
		Alignment: uint32(c.alignment), MaxSlots: uint32(c.max_slots), Backend: Backend(c.backend),
		Device: int32(c.device), ScaleMode: ScaleMode(c.scale_mode), NumThreads: uint32(c.num_threads),
	}
}

// Layout is the whole-slot layout of a cache (swa_layout_t).
type Layout struct {
	Window          uint32 // W.
	DraftTokens     uint32 // N.
	RingLen         uint32 // R.
	Alignment       uint32 // Region alignment in bytes.
	NumLayers       uint32 // Layers in the cache.
	NumStoredLayers uint32 // Layers whose rings are persisted.
	MaxSlots        uint32 // Slots in the pool.
	MaxRingTokens   uint32 // R - W + 1: most query tokens of a ring-only step.
	SlotBytes       uint64 // Bytes of one slot.
	StoredOffset    uint64 // Offset of the stored region in a slot (always 0).
	StoredBytes     uint64 // Bytes of the stored region.
	PoolBytes       uint64 // MaxSlots * SlotBytes.
	Fingerprint     uint64 // Stable hash of everything that shapes the bytes.
	// CompressBytes are every layer's compression regions in a slot.
	CompressBytes uint64
	// CompressSavedBytes is the blob's compression section (0: none).
	CompressSavedBytes uint64
}

func layoutFromC(l *C.swa_layout_t) Layout {
	return Layout{
		Window: uint32(l.window), DraftTokens: uint32(l.draft_tokens), RingLen: uint32(l.ring_len),
		Alignment: uint32(l.alignment), NumLayers: uint32(l.num_layers),
		NumStoredLayers: uint32(l.num_stored_layers), MaxSlots: uint32(l.max_slots),
		MaxRingTokens: uint32(l.max_ring_tokens), SlotBytes: uint64(l.slot_bytes),
		StoredOffset: uint64(l.stored_offset), StoredBytes: uint64(l.stored_bytes),
		PoolBytes: uint64(l.pool_bytes), Fingerprint: uint64(l.fingerprint),
		CompressBytes: uint64(l.compress_bytes), CompressSavedBytes: uint64(l.compress_saved_bytes),
	}
}

// LayerLayout is the layout of one layer inside a slot (swa_layer_layout_t).
type LayerLayout struct {
	Role               LayerRole // Stored or dropped.
	KVFormat           Format    // Ring format.
	HeadsPerToken      uint32    // KVHeads, times 2 when K and V are separate.
	VecBytes           uint32    // Bytes of one vector.
	BytesPerToken      uint32    // HeadsPerToken * VecBytes.
	RingLen            uint32    // R.
	RingOffset         uint64    // Offset of the ring inside a slot.
	RingBytes          uint64    // Ring bytes rounded up to the alignment.
	CompressLen        uint32    // Compression ring entries, 0 = none.
	CompressEntryBytes uint32    // Bytes of one compression entry.
	CompressOffset     uint64    // Offset of the compression region.
	CompressBytes      uint64    // Compression region bytes.
	CompressKind       CompressKind
	CompressRatio      uint32 // c (0 = none).
	CompressHeadDim    uint32 // d of the entries (typed kinds).
	IndexHeadDim       uint32 // The indexer compressor's entry width; 0 = none.
	IndexRowBytes      uint32 // Bytes of one indexer ring row; 0 = none.
	CompressRowValues  uint32 // Values per kv (or gate) half of a main ring row: d or 2d.
	IndexOffset        uint64 // Offset of the indexer ring.
	IndexBytes         uint64 // Indexer ring bytes.
}

// TensorView is a strided byte-tensor view of a layer's ring over all slots
// (swa_tensor_view_t). Data is the address of memory the cache owns (host or
// device): valid until the cache is closed, and not Go memory.
type TensorView struct {
	Data    uintptr  // Base address.
	Backend Backend  // BackendCPU or BackendCUDA.
	Device  int32    // CUDA device, -1 for host memory.
	NDim    uint32   // Number of dimensions (4 for a ring).
	Shape   [4]int64 // Extents.
	Strides [4]int64 // Byte strides.
}

// Stats are the counters of a cache (swa_cache_stats_t).
type Stats struct {
	Steps          uint64 // Successful steps (one per layer).
	Tokens         uint64 // New tokens processed by those steps.
	NonfiniteBlock uint64 // 32-value blocks with a NaN or Inf met while encoding.
	SlotsInUse     uint32 // Allocated slots now.
	MaxSlots       uint32 // Slots in the pool.
	PoolBytes      uint64 // Bytes of the pool.
}

// SlotInfo is the state of one slot (swa_slot_info_t).
type SlotInfo struct {
	Slot       uint32 // The slot id.
	Allocated  bool   // The slot is allocated.
	WrittenEnd int32  // One past the highest position written.
	ValidStart int32  // Positions below it are missing.
	ByteOffset uint64 // Offset of the slot in the pool.
}
