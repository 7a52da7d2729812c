/*
 * libswacache — sliding-window-attention KV state for inference engines.
 *
 * One stable C99 ABI. Conventions that hold for every function below:
 *  - Every fallible call returns swa_status_t (values pinned, absl::StatusCode
 *    numbering). On failure, swa_last_error() returns a message for the
 *    calling thread that names the offending value, and nothing that the call
 *    was asked to change has changed.
 *  - Every struct starts with `size_t struct_size`, is filled with defaults by
 *    its *_init() function and is passed by pointer. Fields are only ever
 *    appended; the sizeof of every released version is accepted (missing
 *    input fields take their init defaults; outputs are written only up to the
 *    caller's struct_size), any other struct_size is an error (docs/api.md).
 *  - Handles are opaque; create/destroy come in pairs; destroy accepts NULL.
 *  - Device streams are `void*` (a cudaStream_t on the CUDA backend).
 *
 * API stability before 1.0: a declaration is stable unless its documentation
 * says "Experimental: may change before 1.0." Stable calls and structs change
 * only compatibly (new functions, appended struct fields) until 1.0.
 * Experimental ones (swa_project, the codec calls, the Redis, Redis Cluster
 * and tiered stores, swa_cache_store_exists/remove, the graph decode) may
 * change or go in any 0.x minor release.
 * The list is in docs/api.md, "API stability".
 *
 * The graph decode (swa_decode_graph_*, swa_slot_set_lengths) is experimental
 * as a whole and the compiler enforces it, as zstd does with
 * ZSTD_STATIC_LINKING_ONLY: it is declared only when the including program
 * defines SWACACHE_EXPERIMENTAL first, so that a program that uses it has
 * opted in and knows it may change. The library always exports it.
 *
 * Behaviour is defined in docs/semantics.md; `\ref sem_...` in the comments
 * below names one of its sections, `\ref md_docs_...` a guide under docs/.
 */
#ifndef SWACACHE_H_
#define SWACACHE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \file swacache.h
 *  \brief The public C API of libswacache.
 *  \see \ref semantics "docs/semantics.md" for what the calls compute and
 *  \ref md_docs_api "docs/api.md" for the conventions and API stability. */

/** \def SWA_API
 *  \brief Marks the exported functions (default visibility); every other symbol
 *  of the library is hidden. */
#if defined(_WIN32)
#if defined(SWACACHE_BUILDING)
#define SWA_API __declspec(dllexport)
#else
#define SWA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define SWA_API __attribute__((visibility("default")))
#else
#define SWA_API
#endif

/* ---- Version ------------------------------------------------------------ */

/** \brief Major version: changes only when the ABI breaks. */
#define SWA_VERSION_MAJOR 0
/** \brief Minor version: new functions or appended struct fields. */
#define SWA_VERSION_MINOR 2
/** \brief Patch version: fixes only. */
#define SWA_VERSION_PATCH 0
/** \brief `major * 10000 + minor * 100 + patch` of this header. */
#define SWA_VERSION_NUMBER \
  (SWA_VERSION_MAJOR * 10000 + SWA_VERSION_MINOR * 100 + SWA_VERSION_PATCH)

/** \brief Version of the linked library, in SWA_VERSION_NUMBER form.
 *  \note Thread-safe. Compare with SWA_VERSION_NUMBER to detect a header/library
 *  mismatch at run time. */
SWA_API uint32_t swa_version_number(void);

/** \brief Version of the linked library as "major.minor.patch".
 *  \return A static string owned by the library; never NULL.
 *  \note Thread-safe. */
SWA_API const char* swa_version_string(void);

/* ---- Status ------------------------------------------------------------- */

/** \brief Result of every fallible call. Values follow absl::StatusCode and are
 *  never renumbered; bindings map codes, never parse messages. */
typedef enum swa_status {
  SWA_OK = 0,                  /**< Success. */
  SWA_CANCELLED = 1,           /**< The operation was cancelled. */
  SWA_UNKNOWN = 2,             /**< An error with no better code. */
  SWA_INVALID_ARGUMENT = 3,    /**< An argument is malformed, whatever the state. */
  SWA_DEADLINE_EXCEEDED = 4,   /**< A store call ran out of time. */
  SWA_NOT_FOUND = 5,           /**< No such key, slot or entry. */
  SWA_ALREADY_EXISTS = 6,      /**< The entry exists already. */
  SWA_PERMISSION_DENIED = 7,   /**< The caller may not do this. */
  SWA_RESOURCE_EXHAUSTED = 8,  /**< Out of slots, memory or budget. */
  SWA_FAILED_PRECONDITION = 9, /**< The state does not allow this call now. */
  SWA_ABORTED = 10,            /**< A concurrent change aborted the call. */
  SWA_OUT_OF_RANGE = 11,       /**< An index past the valid range. */
  SWA_UNIMPLEMENTED = 12,      /**< Not supported by this build or backend. */
  SWA_INTERNAL = 13,           /**< A broken invariant inside the library. */
  SWA_UNAVAILABLE = 14,        /**< A transient failure (store, device). */
  SWA_DATA_LOSS = 15,          /**< Corrupt or truncated data. */
  SWA_UNAUTHENTICATED = 16     /**< Missing credentials (store). */
} swa_status_t;

/** \brief Fixed English name of a status code ("OK", "INVALID_ARGUMENT", ...).
 *  \return A static string; "UNRECOGNIZED_STATUS" for values not listed above.
 *  \note Thread-safe. */
SWA_API const char* swa_status_string(swa_status_t status);

/** \brief The message of the calling thread's last failed call.
 *  \return A thread-local string owned by the library, valid until the next
 *  failing call on this thread; "" when no call on this thread has failed.
 *  Successful calls do not clear it.
 *  \see \ref md_docs_api "docs/api.md": which status code when.
 *  \note Thread-safe: each thread sees only its own message. */
SWA_API const char* swa_last_error(void);

/* ---- Enumerations ------------------------------------------------------- */

/** \brief Storage format of the KV vectors in a layer's ring (\ref sem_slot_layout). */
typedef enum swa_format {
  SWA_FORMAT_MXFP8 = 0, /**< D E4M3 codes then D/32 E8M0 scales: D + D/32 bytes. */
  SWA_FORMAT_BF16 = 1,  /**< 2D bytes. */
  SWA_FORMAT_FP32 = 2,  /**< 4D bytes (debug and reference). */
  /** DeepSeek-V4's FP8 record (`fp8_ds_mla` in vLLM, FlashMLA's MODEL1 record):
   *  D must be 512, the last 64 dims being the RoPE part. 584 bytes: the 448
   *  NoPE dims as E4M3 codes, the 64 RoPE dims as BF16 (128 bytes), then 7
   *  UE8M0 scales (one per 64 NoPE dims) and one zero pad byte. The scale of a
   *  group is 2^ceil(log2(max(amax/448, 1e-4))). See \ref md_docs_codec
   *  "docs/codec.md" for the byte order and how it maps to a FlashMLA page.
   *  Supported by the CPU backend, the CUDA backend (every step path: ring-only,
   *  staged and the graph decode; its attention always takes the small tiles),
   *  the codec calls (`swa_codec_*`) and the stores. */
  SWA_FORMAT_FP8_DS_MLA = 3
} swa_format_t;

/** \brief Element type of tensors exchanged with the library. */
typedef enum swa_dtype {
  SWA_DTYPE_FP32 = 0, /**< IEEE binary32. */
  SWA_DTYPE_BF16 = 1  /**< bfloat16, stored as uint16_t. */
} swa_dtype_t;

/** \brief How an MXFP8 block's E8M0 scale is chosen (\ref sem_mxfp8). */
typedef enum swa_scale_mode {
  SWA_SCALE_CEIL = 0, /**< Smallest power of two with amax/scale <= 448 (default). */
  SWA_SCALE_FLOOR = 1 /**< OCP rule: exponent(amax) - 8; large elements saturate. */
} swa_scale_mode_t;

/** \brief Whether a layer's ring is persisted to the external store. */
typedef enum swa_layer_role {
  SWA_LAYER_STORED = 0, /**< Ring is part of the stored (persisted) region. */
  SWA_LAYER_DROPPED = 1 /**< Ring is kept for decoding but never persisted. */
} swa_layer_role_t;

/** \brief Where the slot pool lives and which backend runs steps. */
typedef enum swa_backend {
  SWA_BACKEND_AUTO = 0, /**< CUDA when built with it and a device exists, else CPU. */
  SWA_BACKEND_CPU = 1,  /**< Host memory, CPU kernels. */
  SWA_BACKEND_CUDA = 2  /**< Device memory, CUDA kernels. */
} swa_backend_t;

/** \brief How a layer's rotary dims are paired (\ref sem_rope). Values pinned. */
typedef enum swa_rope_style {
  SWA_ROPE_NONE = 0, /**< No rotation inside the step (the engine rotates, or no RoPE). */
  SWA_ROPE_NEOX = 1, /**< "Rotate half": dim i pairs with dim i + n/2 of the rotary slice. */
  SWA_ROPE_GPTJ = 2  /**< Interleaved: dims 2i and 2i + 1 of the rotary slice pair up. */
} swa_rope_style_t;

/** \brief What a layer's compression region holds (\ref sem_compress). Values pinned. */
typedef enum swa_compress_kind {
  /** Opaque: `compress_ratio + N` entries of `compress_entry_bytes` each that
   *  the engine packs and reads itself (the behaviour before the typed kinds). */
  SWA_COMPRESS_OPAQUE = 0,
  /** DeepSeek-V4 HCA: non-overlapping windows of `compress_ratio` tokens; a
   *  token's source row is `kv` and `gate`, `compress_head_dim` wide each. */
  SWA_COMPRESS_HCA = 1,
  /** DeepSeek-V4 CSA: windows of `compress_ratio` tokens overlapping by one
   *  stride; a token's source row is `kv` and `gate`, `2 * compress_head_dim`
   *  wide each (two series Ca | Cb). Entry w reads window w-1's Ca and window
   *  w's Cb. Optionally a second compressor of the same structure, the
   *  Lightning Indexer's, `index_head_dim` wide. */
  SWA_COMPRESS_CSA = 2
} swa_compress_kind_t;

/* ---- Configuration ------------------------------------------------------ */

/** \brief Description of one SWA layer. Fill with swa_layer_desc_init(). */
typedef struct swa_layer_desc {
  size_t struct_size;         /**< sizeof(swa_layer_desc_t), set by init. */
  swa_layer_role_t role;      /**< Stored or dropped. Default SWA_LAYER_STORED. */
  uint32_t q_heads;           /**< Query heads Hq, a multiple of kv_heads. Default 64. */
  uint32_t kv_heads;          /**< KV heads Hkv (vectors per token for K). Default 1. */
  uint32_t head_dim;          /**< D, a multiple of 32 for MXFP8. Default 512. */
  uint32_t shared_kv;         /**< 1: one vector is both K and V (MQA/latent). Default 1. */
  swa_format_t kv_format;     /**< Ring storage format. Default SWA_FORMAT_MXFP8. */
  /** c, the compressor's rate (window of source tokens per compressed entry);
   *  0 = no compression state. Default 0. */
  uint32_t compress_ratio;
  /** SWA_COMPRESS_OPAQUE: bytes of one compression entry (non-zero with
   *  compress_ratio). Typed kinds (compress_kind): must be 0, the library
   *  sizes the rows. Default 0. */
  uint32_t compress_entry_bytes;
  float rope_theta;           /**< RoPE base; used when rope_style is not NONE. Default 10000. */
  uint32_t rope_dims;         /**< Rotary dims n (even); used when rope_style is not NONE. Default 0. */
  uint32_t has_sinks;         /**< 1: the layer has per-head attention sinks. Default 0. */
  /* Appended in 0.2.0 (a struct_size without them means: no RoPE, no soft-cap). */
  /** Rotate q and the new keys inside swa_step by each token's position
   *  (\ref sem_rope). Default SWA_ROPE_NONE. */
  swa_rope_style_t rope_style;
  uint32_t rope_first_dim;    /**< First rotary dim of each head; first + n <= head_dim. Default 0. */
  float rope_yarn_factor;     /**< YaRN context factor; 0 or 1 = plain RoPE. Default 0. */
  uint32_t rope_yarn_original_max_positions; /**< YaRN: pre-extension context length. Default 4096. */
  float rope_yarn_beta_fast;  /**< YaRN: high-frequency boundary (rotations). Default 32. */
  float rope_yarn_beta_slow;  /**< YaRN: low-frequency boundary (rotations). Default 1. */
  uint32_t rope_yarn_truncate; /**< YaRN: 1 rounds the boundary dims (floor/ceil). Default 1. */
  /** Multiplies cos and sin (so every logit by its square); 0 = the YaRN
   *  default 0.1 ln(factor) + 1, or 1 without YaRN. Default 0. */
  float rope_attention_factor;
  /** 1: rotate the output's rotary dims back by minus the query position
   *  (DeepSeek-V4, where V is the rotated key vector). Default 0. */
  uint32_t rope_derotate_output;
  /** s = cap * tanh(s / cap) on the scaled logits before the softmax (Gemma-2);
   *  0 = off. Default 0. */
  float logit_softcap;
  /* Appended after 0.2.0 (a struct_size without them means: softmax_scale 0). */
  /** The layer's softmax scale: the scores q.k are multiplied by it before the
   *  soft-cap and the softmax (\ref sem_attention); 0 = 1/sqrt(head_dim).
   *  A non-zero swa_step_args_t::softmax_scale overrides it for that step
   *  (swa_step() and the graph decode alike). Gemma-2's
   *  query_pre_attn_scalar q gives 1/sqrt(q) here, next to its soft-cap.
   *  Finite and >= 0. Default 0. */
  float softmax_scale;
  /** Must be 0 (INVALID_ARGUMENT otherwise): room for a later field whose 0
   *  keeps today's behaviour (softmax_scale alone would not have grown the
   *  struct past 0.2.0's padded size). Default 0. */
  uint32_t reserved;
  /* Appended after 0.2.0 (a struct_size without them means: an opaque
   * compression region, as compress_ratio and compress_entry_bytes say). */
  /** What the compression region holds (\ref sem_compress). A typed kind
   *  (HCA, CSA) needs compress_ratio >= 1, compress_head_dim and
   *  compress_entry_bytes = 0; the library then keeps the compressor's
   *  source rows in a ring, plans which windows close and computes their
   *  entries (swa_compress_step()). Default SWA_COMPRESS_OPAQUE. */
  swa_compress_kind_t compress_kind;
  /** d: width of one compressed entry (DeepSeek-V4: 512). HCA source rows are
   *  d wide, CSA rows 2d. 1 ... 16384; 0 for SWA_COMPRESS_OPAQUE. Default 0. */
  uint32_t compress_head_dim;
  /** RoPE of the compressed entries: the trailing `compress_rope_dims` dims of
   *  each entry are rotated in interleaved pairs (dims 2i, 2i + 1 of that
   *  slice) at the entry's position w * compress_ratio, with this layer's
   *  rope_theta, YaRN fields and attention factor, the frequencies computed
   *  for n = compress_rope_dims (DeepSeek-V4: 64, the "compress" table, which
   *  is the CSA/HCA layer's own). Even, <= compress_head_dim (and <=
   *  index_head_dim); 0 = entries are not rotated. Default 0. */
  uint32_t compress_rope_dims;
  /** Storage of the buffered source rows: SWA_FORMAT_FP32 (exact) or
   *  SWA_FORMAT_BF16 (half the bytes; transformers keeps them in the
   *  activation dtype, BF16 for the released checkpoints). Default
   *  SWA_FORMAT_FP32. */
  swa_format_t compress_row_format;
  /** SWA_COMPRESS_CSA only: width of the Lightning Indexer's compressor
   *  entries (DeepSeek-V4: 128), a second ring of the same rate and structure
   *  (compressor 1 of swa_compress_step()); 0 = no indexer. Default 0. */
  uint32_t index_head_dim;
  /** Must be 0 (INVALID_ARGUMENT otherwise). Default 0. */
  uint32_t compress_reserved;
} swa_layer_desc_t;

/** \brief Fill *desc with the defaults listed on swa_layer_desc_t (a
 *  DeepSeek-V4-like MQA layer: 64 query heads on one shared 512-wide MXFP8 vector).
 *  \param[out] desc Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_layer_desc_init(swa_layer_desc_t* desc);

/** \brief Configuration of one cache. Fill with swa_config_init(). */
typedef struct swa_config {
  size_t struct_size;         /**< sizeof(swa_config_t), set by init. */
  uint32_t window;            /**< W, keys visible to a query including itself. Default 128. */
  uint32_t draft_tokens;      /**< N, speculative draft tokens per step. Default 0. */
  uint32_t ring_len;          /**< R; 0 = W + N + 1. Must be >= W + N. Default 0. */
  uint32_t alignment;         /**< Region alignment in bytes, power of two >= 16. Default 32. */
  uint32_t max_slots;         /**< State slots in the pool, 1 ... 2^20. The slot table keeps
                                   about 32 bytes per slot and every plan 8 bytes per slot,
                                   whatever the batch. Default 64. */
  swa_backend_t backend;      /**< Default SWA_BACKEND_AUTO. */
  int32_t device;             /**< CUDA device ordinal for the CUDA backend. Default 0. */
  swa_scale_mode_t scale_mode; /**< MXFP8 scale rule. Default SWA_SCALE_CEIL. */
  uint32_t num_threads;       /**< CPU backend threads; 0 = hardware threads. Default 0. */
  uint32_t num_layers;        /**< Entries in `layers`. */
  /** Layer descriptions in model order; the index is the layer id. All entries
   *  share the struct_size of layers[0], which is used as the array stride.
   *  Borrowed during swa_cache_create() only. */
  const swa_layer_desc_t* layers;
  /** Optional caller-provided pool memory (host memory for the CPU backend,
   *  device memory for CUDA); NULL = the library allocates. Must be aligned to
   *  `alignment` and hold at least max_slots * slot_bytes (swa_layout_compute()).
   *  The caller keeps ownership and must keep it alive until destroy. */
  void* pool;
  size_t pool_bytes;          /**< Size of `pool` in bytes. */
  /* Appended after 0.2.0 (a struct_size without them means: no store secret,
   * no store namespace). */
  /** Optional secret for authenticated blobs (docs/store.md, "Threat model"):
   *  when set, every blob this cache saves carries an HMAC-SHA-256 tag over its
   *  header, its full store key and its payload, and every restore verifies the
   *  tag before the slot is touched (a missing or wrong tag: SWA_DATA_LOSS,
   *  slot unchanged). NULL with store_secret_len 0 (the default) = no tag;
   *  otherwise 16 ... 1024 bytes. Copied by swa_cache_create(), which wipes its
   *  copy on swa_cache_destroy(); the caller's buffer is borrowed during the
   *  call only. The tag authenticates; it does not encrypt. */
  const uint8_t* store_secret;
  size_t store_secret_len;    /**< Bytes of `store_secret`. Default 0. */
  /** Optional tenant namespace: prefixed by the library to every store key of
   *  this cache (save, save_at, restore, exists, remove, probe), so that caches
   *  with different namespaces never see each other's blobs in a shared store,
   *  even under equal engine keys. NULL with store_namespace_len 0 (the
   *  default) = no namespace (keys as before); otherwise 1 ... 256 bytes of any
   *  value. The store key is "ns" + decimal length + ":" + namespace + the
   *  un-namespaced key (docs/store.md, "Keys"). Copied by swa_cache_create(). */
  const uint8_t* store_namespace;
  size_t store_namespace_len; /**< Bytes of `store_namespace`. Default 0. */
} swa_config_t;

/** \brief Fill *config with the defaults listed on swa_config_t (no layers).
 *  \param[out] config Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_config_init(swa_config_t* config);

/* ---- Layout ------------------------------------------------------------- */

/** \brief Whole-slot layout of a cache (\ref sem_slot_layout). */
typedef struct swa_layout {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_layout_t). */
  uint32_t window;            /**< W. */
  uint32_t draft_tokens;      /**< N. */
  uint32_t ring_len;          /**< R. */
  uint32_t alignment;         /**< Region alignment in bytes. */
  uint32_t num_layers;        /**< Layers in the cache. */
  uint32_t num_stored_layers; /**< Layers whose rings are persisted. */
  uint32_t max_slots;         /**< Slots in the pool. */
  uint32_t max_ring_tokens;   /**< R - W + 1: most query tokens of a ring-only step. */
  uint64_t slot_bytes;        /**< Bytes of one slot (aligned). */
  uint64_t stored_offset;     /**< Offset of the stored region in a slot (always 0). */
  uint64_t stored_bytes;      /**< Bytes of the stored region (padded stored rings). */
  uint64_t pool_bytes;        /**< max_slots * slot_bytes. */
  uint64_t fingerprint;       /**< Stable 64-bit hash of everything that shapes the bytes. */
  /* Appended after 0.2.0. */
  /** Bytes of every layer's compression region in a slot (rings padded). */
  uint64_t compress_bytes;
  /** Bytes of the blob's compression section (\ref sem_store_blob): the
   *  typed compressor rings (main and indexer, unpadded) of the stored
   *  layers; 0 when none. */
  uint64_t compress_saved_bytes;
} swa_layout_t;

/** \brief Layout of one layer inside a slot. */
typedef struct swa_layer_layout {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_layer_layout_t). */
  swa_layer_role_t role;      /**< Stored or dropped. */
  swa_format_t kv_format;     /**< Ring format. */
  uint32_t heads_per_token;   /**< kv_heads, times 2 when K and V are separate. */
  uint32_t vec_bytes;         /**< Bytes of one vector in kv_format. */
  uint32_t bytes_per_token;   /**< heads_per_token * vec_bytes. */
  uint32_t ring_len;          /**< R. */
  uint64_t ring_offset;       /**< Offset of the ring inside a slot. */
  uint64_t ring_bytes;        /**< R * bytes_per_token rounded up to the alignment. */
  /** Compression ring rows L, 0 = none: c + N (opaque and HCA), 2c + N
   *  (CSA, whose next window also reads the previous window's rows). */
  uint32_t compress_len;
  /** Bytes of one ring row: the opaque entry, or a typed compressor's source
   *  row (kv then gate, each compress_head_dim (HCA) or 2 * compress_head_dim
   *  (CSA) values in compress_row_format). */
  uint32_t compress_entry_bytes;
  uint64_t compress_offset;   /**< Offset of the compressor ring (0 when none). */
  uint64_t compress_bytes;    /**< compress_len * entry bytes rounded up to the alignment. */
  /* Appended after 0.2.0. */
  swa_compress_kind_t compress_kind; /**< The layer's compress_kind. */
  uint32_t compress_ratio;    /**< c (0 = none). */
  uint32_t compress_head_dim; /**< d of the entries (typed kinds; else 0). */
  uint32_t index_head_dim;    /**< The indexer compressor's entry width; 0 = none. */
  uint32_t index_row_bytes;   /**< Bytes of one indexer ring row (2 * 2 * index_head_dim values); 0 = none. */
  uint32_t compress_row_values; /**< Values per kv (or gate) half of a main ring row: d or 2d. */
  uint64_t index_offset;      /**< Offset of the indexer ring (compress_len rows), 0 = none. */
  uint64_t index_bytes;       /**< compress_len * index_row_bytes rounded up to the alignment. */
} swa_layer_layout_t;

/** \brief Strided byte-tensor view of memory owned by a cache. */
typedef struct swa_tensor_view {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_tensor_view_t). */
  void* data;                 /**< Base address (host or device, see backend). */
  swa_backend_t backend;      /**< SWA_BACKEND_CPU or SWA_BACKEND_CUDA. */
  int32_t device;             /**< CUDA device ordinal, -1 for host memory. */
  uint32_t ndim;              /**< Number of dimensions (4 for a ring). */
  int64_t shape[4];           /**< Extents; unused entries are 1. */
  int64_t strides[4];         /**< Byte strides; unused entries are 0. */
} swa_tensor_view_t;

/** \brief Compute the layout a configuration would get, without creating a cache.
 *  \param[in] config Validated exactly as swa_cache_create() does.
 *  \param[out] out Whole-slot layout; out->struct_size must be set.
 *  \retval SWA_OK on success; SWA_INVALID_ARGUMENT for an invalid configuration.
 *  \note Thread-safe. Use it to size a caller-provided pool. */
SWA_API swa_status_t swa_layout_compute(const swa_config_t* config, swa_layout_t* out);

/* ---- Cache -------------------------------------------------------------- */

/** \brief Opaque cache handle: layout, slot pool, slot table. */
typedef struct swa_cache swa_cache_t;

/** \brief Validate a configuration and create a cache with its slot pool.
 *  \param[in] config Borrowed for the call only (layers included).
 *  \param[out] out Receives the new cache; unchanged on failure.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for any invalid field (the message names it).
 *  \retval SWA_RESOURCE_EXHAUSTED when the pool cannot be allocated.
 *  \retval SWA_UNIMPLEMENTED for a backend this build does not have, a CUDA
 *  device the build's kernels do not run on (compute capability below 8.0, or
 *  none of the built architectures serves it; the message names the device and
 *  its capability), or a layer the backend's step kernels cannot run (e.g. a
 *  head dim outside its list; the message names the layer and the value): a
 *  cache that was created runs every one of its layers.
 *  \see \ref md_docs_api "docs/api.md" (backends, ownership), \ref md_docs_layout "docs/layout.md".
 *  \note Thread-safe. The caller owns the cache and frees it with swa_cache_destroy(). */
SWA_API swa_status_t swa_cache_create(const swa_config_t* config, swa_cache_t** out);

/** \brief Destroy a cache and free its pool (unless caller-provided). NULL is a no-op.
 *  \note Not thread-safe with any other call on the same cache. */
SWA_API void swa_cache_destroy(swa_cache_t* cache);

/** \brief Read the whole-slot layout of a cache.
 *  \param[in] cache The cache.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK, or SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
 *  \see \ref md_docs_layout "docs/layout.md", \ref sem_memory.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_layout(const swa_cache_t* cache, swa_layout_t* out);

/** \brief Read the layout of one layer.
 *  \param[in] cache The cache.
 *  \param[in] layer Layer id (index into the config's layers).
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE for a layer id past the last layer;
 *  SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_layer_layout(const swa_cache_t* cache, uint32_t layer,
                                            swa_layer_layout_t* out);

/** \brief Tensor view of one layer's ring over all slots:
 *  `uint8 [max_slots, R, heads_per_token, vec_bytes]` with byte strides
 *  `(slot_bytes, bytes_per_token, vec_bytes, 1)`.
 *  \param[in] cache The cache; the view borrows its pool and is valid until destroy.
 *  \param[in] layer Layer id.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE for a bad layer; SWA_INVALID_ARGUMENT for NULL
 *  or a bad struct_size.
 *  \see \ref sem_slot_layout, \ref md_docs_layout "docs/layout.md".
 *  \note Thread-safe. Ring row `r = slot * R + (p mod R)` lives at
 *  `data + (r / R) * slot_bytes + (r mod R) * bytes_per_token`. */
SWA_API swa_status_t swa_cache_layer_view(const swa_cache_t* cache, uint32_t layer,
                                          swa_tensor_view_t* out);

/* ---- Slots -------------------------------------------------------------- */

/** \brief Per-slot state (\ref sem_rewind, \ref sem_replay). */
typedef struct swa_slot_info {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_slot_info_t). */
  uint32_t slot;              /**< The slot id. */
  uint32_t allocated;         /**< 1 when allocated. */
  int32_t written_end;        /**< One past the highest position written. */
  int32_t valid_start;        /**< Positions below it are missing. */
  uint64_t byte_offset;       /**< slot * slot_bytes: offset of the slot in the pool. */
} swa_slot_info_t;

/** \brief Allocate a free state slot in O(1). The slot starts with
 *  written_end = valid_start = 0; its bytes are not cleared.
 *  \param[in] cache The cache.
 *  \param[out] slot Receives the slot id; unchanged on failure.
 *  \retval SWA_OK; SWA_RESOURCE_EXHAUSTED when every slot is in use;
 *  SWA_INVALID_ARGUMENT for NULL.
 *  \note Thread-safe (internally locked). */
SWA_API swa_status_t swa_slot_alloc(swa_cache_t* cache, uint32_t* slot);

/** \brief Return an allocated slot to the pool in O(1).
 *  \param[in] cache The cache.
 *  \param[in] slot The slot id to free.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE for an id >= max_slots;
 *  SWA_FAILED_PRECONDITION for a slot that is not allocated (double free), is
 *  being saved or restored, or that a decode graph holds (imported by
 *  swa_decode_graph_import() and not yet released by
 *  swa_decode_graph_release() or swa_decode_graph_destroy(): its steps could
 *  write the next owner's ring; the message names the slot), or that a
 *  swa_step() running on another thread uses ("slot N is in use by 1 running
 *  swa_step call", see swa_step()). Nothing changes on failure.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_slot_free(swa_cache_t* cache, uint32_t slot);

/** \brief Reset an allocated slot for recompute: written_end = valid_start = 0.
 *  The bytes are left as they are (no index ever names an unwritten position).
 *  \param[in] cache The cache.
 *  \param[in] slot The slot id to reset.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE; SWA_FAILED_PRECONDITION when not
 *  allocated, being saved or restored, held by a decode graph (release it
 *  first, as at swa_slot_free()), or used by a running swa_step() (see there).
 *  Nothing changes on failure.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_slot_reset(swa_cache_t* cache, uint32_t slot);

/** \brief Fork a sequence: copy every byte and the metadata of slot `src` into
 *  slot `dst`. Both must be allocated; src == dst is a no-op. Call it between
 *  steps, as swa_slot_save(): a built plan has already advanced `src`'s
 *  written_end, so a copy taken after swa_plan_build() and before every layer
 *  of that build has stepped (or the plan was cancelled) counts rows that are
 *  not written yet (not detected: \ref sem_slot_lifecycle).
 *  \param[in] cache The cache.
 *  \param[in] src Slot to copy from.
 *  \param[in] dst Slot to overwrite.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE; SWA_FAILED_PRECONDITION when either slot is
 *  not allocated, busy or device-advanced (swa_decode_graph_import()), or when
 *  a decode graph holds `dst` (release it first, as at swa_slot_free(); a held
 *  `src` may be copied once its lengths are host-known), or when a swa_step()
 *  running on another thread uses either slot (see swa_step()). Nothing
 *  changes on failure.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_slot_copy(swa_cache_t* cache, uint32_t src, uint32_t dst);

/** \brief Read a slot's state.
 *  \param[in] cache The cache.
 *  \param[in] slot The slot id.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK (also for a free slot: allocated = 0); SWA_OUT_OF_RANGE;
 *  SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_slot_info(const swa_cache_t* cache, uint32_t slot,
                                   swa_slot_info_t* out);

/* ---- Slot valid_start and bounded replay -------------------------------- */

/** \brief Raise a slot's valid_start (\ref sem_replay): positions below it are
 *  treated as missing; loads zero-fill them and no index names them.
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot.
 *  \param[in] valid_start The new value, >= the slot's current valid_start
 *  (lowering it would expose positions that were never written; reset the slot
 *  instead). It may exceed written_end: the next step must then start exactly
 *  at valid_start.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for a negative value;
 *  SWA_OUT_OF_RANGE for a slot id past the pool; SWA_FAILED_PRECONDITION for a
 *  slot that is not allocated, busy, device-advanced or held by a decode graph
 *  (the graph keeps the valid_start it imported; release the slot first, as at
 *  swa_slot_free()), or a value below the current one.
 *  \note Thread-safe (internally locked). */
SWA_API swa_status_t swa_slot_set_valid_start(swa_cache_t* cache, uint32_t slot,
                                              int32_t valid_start);

/** \brief Prepare a slot for bounded replay (\ref sem_replay): after a prefix
 *  hit of `hit_len` tokens for the global layers, the engine re-runs only
 *  positions `max(0, hit_len - W) ... hit_len - 1` as a prefill.
 *  Sets valid_start = written_end = max(0, hit_len - W), so that a step with
 *  q_start = that value (and its seq's valid_start <= it) is legal.
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot holding no valid position (fresh, reset,
 *  or already prepared: written_end <= valid_start).
 *  \param[in] hit_len H, the prefix length, >= 0.
 *  \param[out] replay_start Receives max(0, H - W); may be NULL.
 *  \param[out] replay_len Receives H - max(0, H - W) (tokens to re-run); may be NULL.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for a negative hit_len;
 *  SWA_OUT_OF_RANGE for a slot id past the pool; SWA_FAILED_PRECONDITION for a
 *  slot that is not allocated, busy, device-advanced, held by a decode graph
 *  (release it first, as at swa_slot_free()) or holds positions (reset it first).
 *  \see \ref md_docs_planner "docs/planner.md".
 *  \note Thread-safe (internally locked). */
SWA_API swa_status_t swa_slot_begin_replay(swa_cache_t* cache, uint32_t slot, int32_t hit_len,
                                           int32_t* replay_start, int32_t* replay_len);

/** \brief Prepare a slot for *exact* replay (\ref sem_replay_exact): like
 *  swa_slot_begin_replay(), but the span re-run is long enough that every
 *  sliding layer's keys and values at the last W - 1 prefix positions come
 *  out exactly as a full prefill would have left them, provided the engine's
 *  full-attention layers attend over their *cached* KV of the whole prefix
 *  during the replay (and the engine does not overwrite that cache with KV
 *  recomputed by the replay).
 *  The span is S = L * (W - 1), plus 1 when `need_last_output` is non-zero
 *  (the caller also needs the output at position hit_len - 1, e.g. the prompt
 *  is exactly the cached prefix); the slot gets
 *  valid_start = written_end = max(0, hit_len - S).
 *  swa_slot_begin_replay() stays the *approximate* mode (S = W).
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot holding no valid position (as at
 *  swa_slot_begin_replay()).
 *  \param[in] hit_len H, the prefix length, >= 0.
 *  \param[in] sliding_layers L, the model's count of sliding-window layers
 *  below and including the last one whose KV the engine needs exact; 0 takes
 *  the cache's own count of layers (stored and dropped). Give the model's
 *  count when the cache holds only some of its sliding layers.
 *  \param[in] need_last_output Non-zero: one position more (S + 1).
 *  \param[out] replay_start Receives max(0, H - S); may be NULL.
 *  \param[out] replay_len Receives H - replay_start; may be NULL.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for a negative hit_len; the codes of
 *  swa_slot_begin_replay() for the slot. Nothing changes on failure.
 *  \note Thread-safe (internally locked). */
SWA_API swa_status_t swa_slot_begin_replay_exact(swa_cache_t* cache, uint32_t slot,
                                                 int32_t hit_len, uint32_t sliding_layers,
                                                 int32_t need_last_output, int32_t* replay_start,
                                                 int32_t* replay_len);

/* ---- Plan --------------------------------------------------------------- */

/** \brief One sequence of a step (\ref sem_plans). A plain array element
 *  without struct_size: its 16-byte layout is fixed and matches device arrays.
 *  `seqlen_k` tokens exist after the step, `seqlen_q` of them are new, so
 *  `q_start = seqlen_k - seqlen_q`. */
typedef struct swa_seq {
  uint32_t slot;        /**< State slot of the sequence (allocated, once per batch). */
  int32_t seqlen_q;     /**< New tokens this step, 0 <= seqlen_q <= seqlen_k. */
  int32_t seqlen_k;     /**< Tokens after the step (one past the last new position). */
  /** Missing positions end: the effective value is max(this, the slot's
   *  valid_start); a larger value raises the slot's. Pass 0 to use the slot's. */
  int32_t valid_start;
} swa_seq_t;

/** \brief Opaque step plan: built once per step, read by every layer. */
typedef struct swa_plan swa_plan_t;

/** \brief Execution path of a built plan (\ref sem_plans). */
typedef enum swa_plan_path {
  SWA_PLAN_PATH_NONE = 0,  /**< Not built, or cancelled. */
  SWA_PLAN_PATH_RING = 1,  /**< Ring-only: every seqlen_q <= R - W + 1. */
  SWA_PLAN_PATH_STAGED = 2 /**< Staged: history load, pivots, store after attention. */
} swa_plan_path_t;

/** \brief What fills the unused tail of a decode index row. */
typedef enum swa_index_pad {
  SWA_INDEX_PAD_NEG1 = 0,    /**< -1 (default). */
  SWA_INDEX_PAD_LAST_ROW = 1 /**< The token's own ring row: legal for kernels that read before they mask. */
} swa_index_pad_t;

/** \brief Plan options. Fill with swa_plan_options_init(). */
typedef struct swa_plan_options {
  size_t struct_size;          /**< sizeof(swa_plan_options_t), set by init. */
  swa_index_pad_t index_pad;   /**< Padding of the decode index. Default SWA_INDEX_PAD_NEG1. */
  /** 1: the plan keeps the [T, W] decode index for the library's own step;
   *  0: only offset_len is kept, and swa_plan_decode_index() writes the index
   *  on demand (cheaper for engines with their own kernels). Default 1. */
  uint32_t materialize_index;
} swa_plan_options_t;

/** \brief Sizes and shape of a built plan; also the call that sizes buffers. */
typedef struct swa_plan_info {
  size_t struct_size;          /**< Set by the caller to sizeof(swa_plan_info_t). */
  swa_plan_path_t path;        /**< SWA_PLAN_PATH_NONE when not built. */
  uint32_t n_seqs;             /**< Sequences in the batch. */
  int32_t n_tokens;            /**< T, new tokens of all sequences. */
  uint32_t window;             /**< W. */
  uint32_t ring_len;           /**< R. */
  uint32_t executed;           /**< 1 once a layer ran (the plan can no longer be cancelled). */
  int32_t max_seqlen_q;        /**< Largest seqlen_q of the batch. */
  int32_t max_seqlen_k;        /**< Largest seqlen_k of the batch. */
  uint32_t n_load_segments;    /**< Entries swa_plan_load_segments() writes (staged; else 0). */
  uint32_t n_store_segments;   /**< Entries swa_plan_store_segments() writes. */
  int32_t history_rows;        /**< Staging section 1 rows, n_seqs * W (staged; else 0). */
  int32_t staging_rows;        /**< Staging rows in all, n_seqs * W + T (staged; else 0). */
  uint64_t decode_index_elems; /**< int32 entries of the decode index, T * W (ring; else 0). */
  uint64_t pivot_elems;        /**< int32 entries of the pivots, 4 T (staged; else 0). */
} swa_plan_info_t;

/** \brief Fill *options with the defaults listed on swa_plan_options_t.
 *  \param[out] options Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_plan_options_init(swa_plan_options_t* options);

/** \brief Create an empty plan for a cache, with default options.
 *  \param[in] cache Borrowed: it must outlive the plan.
 *  \param[out] out Receives the plan; unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL.
 *  \note Thread-safe. The caller owns the plan (swa_plan_destroy()). */
SWA_API swa_status_t swa_plan_create(swa_cache_t* cache, swa_plan_t** out);

/** \brief Create an empty plan with options.
 *  \param[in] cache Borrowed: it must outlive the plan.
 *  \param[in] options Validated and copied; NULL means the defaults.
 *  \param[out] out Receives the plan; unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size or field.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_plan_create_with_options(swa_cache_t* cache,
                                                  const swa_plan_options_t* options,
                                                  swa_plan_t** out);

/** \brief Destroy a plan. NULL is a no-op. A built plan's slot updates stay.
 *  \note Not thread-safe with other calls on the same plan. */
SWA_API void swa_plan_destroy(swa_plan_t* plan);

/** \brief Plan one step: validate every sequence (\ref sem_rewind, \ref sem_pivots), then
 *  advance each slot (written_end = seqlen_k; valid_start raised to the
 *  effective value) and compute every index of the step. Reuses the plan's
 *  memory. Building a built plan again keeps the previous build's slot updates.
 *  \param[in] plan The plan.
 *  \param[in] seqs Borrowed array of n_seqs sequences (may be NULL when n_seqs is 0).
 *  \param[in] n_seqs Number of sequences, at most max_slots.
 *  \retval SWA_OK.
 *  \retval SWA_INVALID_ARGUMENT for a negative length or valid_start,
 *  seqlen_q > seqlen_k, a seq's valid_start past its q_start, a slot twice in
 *  the batch, or token counts that overflow int32 index arithmetic.
 *  \retval SWA_OUT_OF_RANGE for a slot id past the pool.
 *  \retval SWA_FAILED_PRECONDITION for a slot that is not allocated, a gap
 *  (q_start > max(written_end, valid_start)), a rewind deeper than the ring
 *  keeps, or q_start below the slot's valid_start.
 *  On failure the message names the sequence index and the numbers, and
 *  neither the slots nor the plan change.
 *  \see \ref md_docs_planner "docs/planner.md" (rewinds, cancel, rebuild, threading).
 *  \note The plan is not thread-safe; builds of different plans on one cache
 *  are serialised by the slot table's lock. */
SWA_API swa_status_t swa_plan_build(swa_plan_t* plan, const swa_seq_t* seqs, uint32_t n_seqs);

/** \brief Undo a built plan that no layer has run: restore every slot it
 *  advanced to its state before the build. The plan becomes empty.
 *  \param[in] plan The plan.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL; SWA_FAILED_PRECONDITION when
 *  the plan is not built, was executed, or a slot changed since the build,
 *  including a slot freed and allocated again, or reset, copied into, restored
 *  into or prepared for replay (even to numbers that match the build's; the
 *  message names the slot). Then nothing is restored.
 *  \note Not thread-safe with other calls on the same plan. */
SWA_API swa_status_t swa_plan_cancel(swa_plan_t* plan);

/** \brief Read the shape of a plan and the sizes of its exported arrays.
 *  \param[in] plan The plan (built or not).
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_info(const swa_plan_t* plan, swa_plan_info_t* out);

/** \brief Export the ring-only decode gather (\ref sem_decode_index).
 *  \param[in] plan A plan built on the ring-only path.
 *  \param[out] offset_len int32 [T, 2]: (first ring row, key count) per token; may be NULL.
 *  \param[out] index int32 [T, W]: ring rows oldest first, then padding; may be NULL.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL plan or both outputs NULL;
 *  SWA_FAILED_PRECONDITION for a plan not built or on the staged path.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_decode_index(const swa_plan_t* plan, int32_t* offset_len,
                                           int32_t* index);

/** \brief A run of rows: `count` rows from `src_row` (or zeros when -1) to `dst_row`. */
typedef struct swa_segment {
  int32_t dst_row; /**< First destination row. */
  int32_t src_row; /**< First source row, or -1 for zero rows. */
  int32_t count;   /**< Rows in the run, >= 1. */
} swa_segment_t;

/** \brief Export the staged path's load plan (\ref sem_load_plan): dst_row is a
 *  staging section-1 row, src_row a flat ring row `slot * R + ring_slot` or -1
 *  (zero fill). At most three segments per sequence, n_seqs * W rows in all.
 *  \param[in] plan A plan built on the staged path.
 *  \param[out] out Array of `capacity` segments; NULL to ask only for the count.
 *  \param[in] capacity Entries available in out.
 *  \param[out] count Receives the number of segments.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL plan or count;
 *  SWA_OUT_OF_RANGE when capacity is too small (nothing written);
 *  SWA_FAILED_PRECONDITION for a plan not built or on the ring-only path.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_load_segments(const swa_plan_t* plan, swa_segment_t* out,
                                            size_t capacity, size_t* count);

/** \brief Export the staged path's pivots (\ref sem_pivots), int32 [T, 4]:
 *  token t attends to staging rows [p0, p0 + p1) and [p2, p2 + p3).
 *  \param[in] plan A plan built on the staged path.
 *  \param[out] pivots int32 [T, 4].
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL;
 *  SWA_FAILED_PRECONDITION for a plan not built or on the ring-only path.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_pivots(const swa_plan_t* plan, int32_t* pivots);

/** \brief Export the store plan per token: the ring row each new token is
 *  written to, or -1 for a token the step does not store (staged path, more
 *  than R new tokens). The ring-only path stores every token before attention;
 *  the staged path stores the last min(seqlen_q, R) after it.
 *  \param[in] plan A built plan.
 *  \param[out] rows int32 [T].
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL; SWA_FAILED_PRECONDITION when
 *  the plan is not built.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_store_rows(const swa_plan_t* plan, int32_t* rows);

/** \brief Export the store plan as runs: dst_row a flat ring row, src_row the
 *  index t of the first new token (batch order), count tokens. At most two per
 *  sequence (split at the ring wrap).
 *  \param[in] plan A built plan.
 *  \param[out] out Array of `capacity` segments; NULL to ask only for the count.
 *  \param[in] capacity Entries available in out.
 *  \param[out] count Receives the number of segments.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL plan or count;
 *  SWA_OUT_OF_RANGE when capacity is too small (nothing written);
 *  SWA_FAILED_PRECONDITION when the plan is not built.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_store_segments(const swa_plan_t* plan, swa_segment_t* out,
                                             size_t capacity, size_t* count);

/** \brief Export per-sequence offsets. Any output may be NULL.
 *  \param[in] plan A built plan.
 *  \param[out] cu_seqlens_q int32 [n_seqs + 1]: first new token of each
 *  sequence, then T. Sequence i's section-2 rows start at n_seqs * W + cu_seqlens_q[i]
 *  and its section-1 rows at i * W.
 *  \param[out] q_start int32 [n_seqs]: seqlen_k - seqlen_q.
 *  \param[out] valid_start int32 [n_seqs]: the effective valid_start the plan used.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for a NULL plan;
 *  SWA_FAILED_PRECONDITION when the plan is not built.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_seq_offsets(const swa_plan_t* plan, int32_t* cu_seqlens_q,
                                          int32_t* q_start, int32_t* valid_start);

/* ---- Step ------------------------------------------------------------- */

/** \brief Arguments of one layer of a planned step. Fill with swa_step_args_init().
 *
 *  Tensors are dense row-major host memory on the CPU backend (device memory on
 *  the CUDA backend), in batch order of the plan's new tokens (sequence 0's
 *  tokens first). All are borrowed for the call only. */
typedef struct swa_step_args {
  size_t struct_size;      /**< sizeof(swa_step_args_t), set by init. */
  uint32_t layer;          /**< Layer id. Default 0. */
  const void* q;           /**< Queries [T, Hq, D] in q_dtype. */
  swa_dtype_t q_dtype;     /**< Default SWA_DTYPE_FP32. */
  const void* k_new;       /**< New keys [T, Hkv, D] in kv_dtype (the shared vector for shared K/V). */
  const void* v_new;       /**< New values [T, Hkv, D]; must be NULL for shared K/V layers. */
  swa_dtype_t kv_dtype;    /**< Default SWA_DTYPE_FP32. */
  /** Output [T, Hq, D] in out_dtype; fully written on success. May be exactly
   *  q (the same address and bytes, so out_dtype == q_dtype: computed in
   *  place, the same bits as a separate output); must not otherwise share
   *  memory with q, k_new, v_new, sinks, lse or positions. */
  void* out;
  swa_dtype_t out_dtype;   /**< Default SWA_DTYPE_FP32. */
  const float* sinks;      /**< [Hq] sink logits: required for layers with has_sinks, else NULL. */
  /** Score scale; 0 = the layer's swa_layer_desc_t::softmax_scale, or
   *  1/sqrt(D) where that is 0 too. Default 0. */
  float softmax_scale;
  void* stream;            /**< cudaStream_t on the CUDA backend; ignored on the CPU. */
  /* Appended in 0.2.0. */
  /** Optional [T, Hq] FP32 output: ln of each row's softmax denominator over
   *  the scaled (and capped) logits, sink included; -inf for a row with no key
   *  and no sink (\ref sem_attention). For swa_attention_merge(). Must not
   *  share memory with any other tensor of the call. Default NULL. */
  float* lse;
  /* Appended after 0.2.0 (a struct_size without it means: positions NULL). */
  /** Optional [T] int32 RoPE positions, host memory on every backend (the
   *  CUDA backend copies them on `stream`; the array may be reused once the
   *  call returns): token t of the step is rotated (q and new key, and its
   *  output back where the layer de-rotates) by positions[t] instead of its
   *  cache position. Only RoPE reads them: the ring rows, the window and the
   *  causal mask still follow the cache positions (\ref sem_rope_positions).
   *  Each value must be >= 0. Ignored by layers without in-step RoPE. NULL =
   *  the cache positions. Not accepted by the graph decode. Default NULL. */
  const int32_t* positions;
} swa_step_args_t;

/** \brief Fill *args with the defaults listed on swa_step_args_t (all pointers NULL).
 *  \param[out] args Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_step_args_init(swa_step_args_t* args);

/** \brief Run one layer of a planned step (\ref sem_plans, \ref sem_attention).
 *
 *  Ring-only plans: the new K/V of every token are encoded in the layer's
 *  format and written to their ring rows, then each token attends over the rows
 *  of its decode index. Staged plans: the keys of each sequence are its W
 *  history rows (zero rows where the load plan says so) and its new tokens
 *  cast back through the format; each token attends per its pivots; then the
 *  last min(seqlen_q, R) new tokens are stored into the ring. Attention is
 *  GQA/MQA with optional sinks and FP32 accumulation.
 *
 *  Run every layer of the cache once per built plan, in any order; the first
 *  successful call makes the plan no longer cancellable.
 *  \see \ref md_docs_step "docs/step.md", \ref md_docs_cpu_attention "docs/cpu_attention.md",
 *  \ref md_docs_cuda_backend "docs/cuda_backend.md".
 *  \param[in,out] cache The cache the plan was created for.
 *  \param[in,out] plan A built plan of this cache. Its first successful step
 *  marks it executed; the first step after each build also derives, once, what
 *  the backend's kernels need from it, which every later layer of the step reuses.
 *  \param[in] args The layer and its tensors.
 *  \retval SWA_OK on success (NaN/Inf inputs are counted in swa_cache_stats()).
 *  \retval SWA_INVALID_ARGUMENT for NULL tensors, a v_new that does not match the
 *  layer's K/V sharing, unknown dtypes, missing or unexpected sinks, a negative or
 *  non-finite softmax_scale, a bad struct_size, a negative positions[t] (the
 *  message names t and the value), or an out or lse that shares memory with
 *  another argument (out may be exactly q, nothing else; extents from the
 *  plan's T new tokens, the layer's Hq, Hkv and D and the dtypes; on a CUDA
 *  cache the host positions are compared with nothing): the message names both
 *  tensors and their byte ranges.
 *  \retval SWA_OUT_OF_RANGE for a layer id past the last layer.
 *  \retval SWA_FAILED_PRECONDITION for a plan that is not built, was cancelled, or
 *  belongs to another cache; or when one of its slots was freed since the build
 *  (allocated again or not: a plan never writes a slot's next owner), or reset,
 *  copied into, restored into or prepared for replay since the build (the slot
 *  holds another sequence), or is being saved or restored. The message names
 *  the slot; nothing is written. Also when `args->layer` already ran for this
 *  build (each layer runs once per swa_plan_build(): a staged step's store
 *  overwrites rows its history load reads); a call refused for its arguments
 *  does not count as the run.
 *  \note While the call runs, the plan's slots are held: swa_slot_free(),
 *  swa_slot_reset(), swa_slot_copy() from or into them, swa_slot_save() and
 *  swa_slot_restore() of them on other threads fail with SWA_FAILED_PRECONDITION
 *  ("slot N is in use by K running swa_step calls ...") and change nothing,
 *  instead of racing the step's reads and writes. Several steps of the same
 *  slots (different layers, on different threads) may run at once. On a CUDA
 *  cache the hold ends when the call returns, once the kernels are enqueued:
 *  ordering later calls after them on the stream stays the caller's job.
 *  The plan itself is not locked: swa_plan_build(), swa_plan_cancel() or
 *  swa_plan_destroy() of it while it steps is undefined. The CPU backend
 *  parallelises internally over config.num_threads threads. Nothing in the
 *  cache changes when validation fails. */
SWA_API swa_status_t swa_step(swa_cache_t* cache, swa_plan_t* plan, const swa_step_args_t* args);

/** \brief Counters of a cache since creation. */
typedef struct swa_cache_stats {
  size_t struct_size;          /**< Set by the caller to sizeof(swa_cache_stats_t). */
  uint64_t steps;              /**< Successful swa_step() calls (one per layer). */
  uint64_t tokens;             /**< New tokens processed by those calls. */
  uint64_t nonfinite_blocks;   /**< 32-value blocks with a NaN or Inf met while encoding. */
  uint32_t slots_in_use;       /**< Allocated slots now. */
  uint32_t max_slots;          /**< Slots in the pool. */
  uint64_t pool_bytes;         /**< Bytes of the pool: fixed, whatever the sequence lengths. */
} swa_cache_stats_t;

/** \brief Read a cache's counters.
 *
 *  On the CUDA backend, nonfinite_blocks counts the work the device has
 *  finished: a host-planned step's blocks join once its kernels are done, and
 *  the graph decode's (swa_decode_graph_step, replayed graphs included) are
 *  read from the device by this call, which copies one counter per live graph
 *  and waits for those copies only (never for the caller's streams; allowed
 *  while a stream is being captured). After a cudaStreamSynchronize the count
 *  equals the CPU backend's for the same inputs.
 *  \param[in] cache The cache.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK, or SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
 *  \retval SWA_INTERNAL when the CUDA backend cannot read a device counter (a
 *  failed CUDA context; the message names the CUDA error).
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_stats(const swa_cache_t* cache, swa_cache_stats_t* out);

/** \brief Arguments of swa_attention_merge(). Fill with swa_merge_args_init().
 *
 *  Two partial attentions over disjoint key sets of the same query rows, each
 *  with its per-row LSE (as swa_step() writes it in `lse`), combined into the
 *  attention over the union of the key sets (\ref sem_merge). With a cache,
 *  tensors are host memory on the CPU backend, device memory on the CUDA
 *  backend; without one, `device` says which. All are borrowed for the call
 *  only. */
typedef struct swa_merge_args {
  size_t struct_size;   /**< sizeof(swa_merge_args_t), set by init. */
  int64_t rows;         /**< Query rows (e.g. T * Hq), >= 0; 0 is a no-op. Default 0. */
  uint32_t head_dim;    /**< Values per row, >= 1. Default 0. */
  swa_dtype_t dtype;    /**< Element type of out_a, out_b and out. Default SWA_DTYPE_FP32. */
  const void* out_a;    /**< [rows, head_dim]: attention over key set A. */
  const float* lse_a;   /**< [rows]: its LSE; -inf for a row that saw no key (and no sink) in A. */
  const void* out_b;    /**< [rows, head_dim]: attention over key set B. */
  const float* lse_b;   /**< [rows]: its LSE. */
  /** [rows, head_dim]: the merged attention. May be exactly out_a or out_b
   *  (the same address: merged in place); must not otherwise share memory
   *  with out_a, out_b, lse_a, lse_b or lse. */
  void* out;
  /** [rows]: the merged LSE. May be NULL, or exactly lse_a or lse_b; must not
   *  otherwise share memory with another tensor of the call. */
  float* lse;
  void* stream;         /**< cudaStream_t on the CUDA backend; ignored on the CPU. */
  /* Appended after 0.2.0 (a struct_size without it means: device -1). */
  /** Where the tensors live when swa_attention_merge() gets no cache: -1 =
   *  host memory (merged on the calling thread); d >= 0 = device memory of
   *  CUDA device d, merged on `stream` (needs a build with the CUDA backend).
   *  With a cache it must be -1 or, on a CUDA cache, the cache's device.
   *  Default -1. */
  int32_t device;
} swa_merge_args_t;

/** \brief Fill *args with the defaults listed on swa_merge_args_t (pointers NULL).
 *  \param[out] args Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_merge_args_init(swa_merge_args_t* args);

/** \brief Merge two partial attentions over disjoint key sets (\ref sem_merge):
 *  per row, with m = max(lse_a, lse_b), w_a = exp(lse_a - m), w_b = exp(lse_b - m):
 *  out = (w_a out_a + w_b out_b) / (w_a + w_b) and lse = m + ln(w_a + w_b),
 *  computed in FP32; the same bits whichever part is A. Any difference of
 *  LSEs is safe (no overflow). Special LSEs (table in \ref sem_merge):
 *  - NaN in either part: the row is poisoned, every value and the LSE are NaN.
 *  - -inf (an empty part, as swa_step() and FlashAttention-3 write it): weight
 *    0, and its output is never read (it may hold anything).
 *  - +inf (an empty part, as FlashAttention-2 and FlashMLA write it): weight 0,
 *    but its output is read, so the NaN output those kernels write for a NaN
 *    row (with +inf) still shows as NaN values.
 *  - finite: its output is read even where its weight rounds to 0, so a NaN or
 *    Inf in it gives NaN values.
 *  Both parts empty gives out = 0 and lse = -inf. The merged LSE depends on the
 *  two LSEs only. The CPU and CUDA backends apply the same rules. A sink
 *  belongs to exactly one part: give it to one call of swa_step() (sinks) and
 *  not to the engine's other attention.
 *  The merge is pure arithmetic and needs no cache: with cache = NULL,
 *  args->device selects host memory (-1, the default: merged on the calling
 *  thread, no pool) or CUDA device memory (d >= 0: one kernel on args->stream
 *  on device d, the same kernel a CUDA cache runs). Host results are the same
 *  bits with or without a cache.
 *  \param[in] cache Selects the backend (host or device pointers); its slots
 *  are not touched. May be NULL (see above).
 *  \param[in] args The tensors and sizes.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for a NULL args, a bad struct_size, a
 *  negative rows, head_dim = 0, NULL tensors (when rows > 0), an unknown
 *  dtype, sizes that overflow: rows * head_dim above 2^60 (the message names
 *  both values), a device below -1, or a device that differs from the
 *  cache's (a CPU cache takes -1 only; a CUDA cache -1 or its own device),
 *  or, with cache = NULL, a CUDA device d that does not exist; or an out or
 *  lse that shares memory with another tensor other than as allowed above
 *  (the message names both tensors and their byte ranges). Nothing is
 *  written then.
 *  \retval SWA_UNIMPLEMENTED for cache = NULL and device >= 0 in a build
 *  without the CUDA backend.
 *  \retval SWA_INTERNAL when the CUDA launch fails (the message names the
 *  CUDA error).
 *  \note Thread-safe; on CUDA the work is enqueued on args->stream. */
SWA_API swa_status_t swa_attention_merge(swa_cache_t* cache, const swa_merge_args_t* args);

/* ---- Compression state (DeepSeek-V4 HCA/CSA compressors) ---------------- */

/** \brief One compressed entry that closes in a planned step
 *  (\ref sem_compress). A plain array element without struct_size: its
 *  40-byte layout is fixed.
 *
 *  The entry's window has S slots, S = c (HCA) or 2c (CSA), at the source
 *  positions first_position ... first_position + S - 1 (CSA: the first c
 *  slots give their Ca half, the last c their Cb half; HCA: the whole row).
 *  They split, in this order, into n_missing slots without a row (a position
 *  below 0 or below the sequence's valid_start: zero weight, as transformers'
 *  -inf gate of window 0's Ca), n_ring slots read from the compressor ring
 *  (slot j's row is (ring_row + j) mod compress_len of the sequence's slot, as
 *  the ring held it *before* the step stored its new rows) and n_new slots
 *  taken from the step's new rows (slot j's is batch row new_row + j). */
typedef struct swa_compress_window {
  uint32_t seq;           /**< Index of the sequence in the plan's batch. */
  uint32_t slot;          /**< Its state slot. */
  /** w, the entry's absolute index in the sequence's compressed KV: the
   *  engine writes the entry there, overwriting the entry of a rewound window. */
  int32_t entry;
  int32_t position;       /**< RoPE position of the entry: w * c. */
  int32_t first_position; /**< Source position of slot 0: w * c (HCA), (w - 1) * c (CSA). */
  int32_t n_missing;      /**< Leading slots without a row. */
  int32_t n_ring;         /**< Slots read from the ring, after the missing ones. */
  int32_t ring_row;       /**< Ring row of the first ring slot (0 when n_ring is 0). */
  int32_t n_new;          /**< Last slots, from the step's new rows. */
  int32_t new_row;        /**< Batch row of the first new slot (0 when n_new is 0). */
} swa_compress_window_t;

/** \brief The entries that close in a built plan for one layer's compressor
 *  (\ref sem_compress), in batch order, then by entry: the order of
 *  swa_compress_step()'s output rows. The layer's indexer compressor closes
 *  the same windows.
 *  \param[in] plan A built plan.
 *  \param[in] layer A layer with a typed compressor (HCA or CSA).
 *  \param[out] out Array of `capacity` windows; NULL to ask only for the count.
 *  \param[in] capacity Entries available in out.
 *  \param[out] count Receives the number of closing windows.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL plan or count, or a layer
 *  without a typed compressor (the message names it); SWA_OUT_OF_RANGE for a
 *  layer id past the last layer, or a capacity below the count (nothing
 *  written); SWA_FAILED_PRECONDITION when the plan is not built.
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_compress_windows(const swa_plan_t* plan, uint32_t layer,
                                               swa_compress_window_t* out, size_t capacity,
                                               size_t* count);

/** \brief Where a built plan stores one layer's new source rows in its
 *  compressor ring (\ref sem_compress): runs with dst_row the flat ring row
 *  `slot * compress_len + (p mod compress_len)`, src_row the batch row of the
 *  first token, count tokens; at most two runs per sequence (split at the
 *  wrap). Only the last min(seqlen_q, compress_len) new rows of a sequence are
 *  stored. The store comes after the windows were read (see
 *  swa_compress_window_t). Same for the indexer ring.
 *  \param[in] plan A built plan.
 *  \param[in] layer A layer with a typed compressor.
 *  \param[out] out Array of `capacity` segments; NULL to ask only for the count.
 *  \param[in] capacity Entries available in out.
 *  \param[out] count Receives the number of runs.
 *  \retval The codes of swa_plan_compress_windows().
 *  \note Safe concurrently with other readers of the same plan. */
SWA_API swa_status_t swa_plan_compress_store_segments(const swa_plan_t* plan, uint32_t layer,
                                                      swa_segment_t* out, size_t capacity,
                                                      size_t* count);

/** \brief Tensor view of one layer's compressor ring over all slots (for an
 *  engine's own compressor kernel): `uint8 [max_slots, compress_len, 2,
 *  half_bytes]` with byte strides `(slot_bytes, row_bytes, half_bytes, 1)`:
 *  per row the kv values, then the gate values (without the position bias),
 *  in compress_row_format.
 *  \param[in] cache The cache; the view borrows its pool.
 *  \param[in] layer A layer with a typed compressor.
 *  \param[in] compressor 0 = the layer's compressor, 1 = its indexer compressor.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE for a bad layer; SWA_INVALID_ARGUMENT for
 *  NULL, a bad struct_size, a layer without a typed compressor or a compressor
 *  it does not have.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_compress_view(const swa_cache_t* cache, uint32_t layer,
                                             uint32_t compressor, swa_tensor_view_t* out);

/** \brief Arguments of one compressor of one layer of a planned step. Fill
 *  with swa_compress_args_init(). Tensors are dense row-major host memory on
 *  the CPU backend (device memory on the CUDA backend), borrowed for the call. */
typedef struct swa_compress_args {
  size_t struct_size;          /**< sizeof(swa_compress_args_t), set by init. */
  uint32_t layer;              /**< Layer id. Default 0. */
  /** 0 = the layer's compressor (entries compress_head_dim wide), 1 = its
   *  Lightning Indexer's compressor (index_head_dim wide). Default 0. */
  uint32_t compressor;
  /** New source rows [T, S] in dtype, the plan's new tokens in batch order;
   *  S = d (HCA) or 2d (CSA, Ca | Cb), d the compressor's entry width. */
  const void* kv;
  const void* gate;            /**< Gate rows [T, S] in dtype, without the position bias. */
  swa_dtype_t dtype;           /**< Of kv and gate. Default SWA_DTYPE_FP32. */
  /** S of the caller's kv and gate rows (and of position_bias): must be the
   *  compressor's, d (HCA) or 2d (CSA). Default 0 (refused: give it). */
  uint32_t row_width;
  /** T, rows of kv and gate: must be the plan's new-token count. Default 0. */
  int64_t rows;
  const float* position_bias;  /**< [c, S] FP32, added to the gates of window slot i mod c. */
  const float* norm_weight;    /**< [d] FP32 weight of the entries' RMSNorm (kv_norm). */
  float norm_eps;              /**< RMSNorm epsilon, finite and > 0. Default 1e-6. */
  /** [out_rows, d] in out_dtype: entry k of the plan's windows in row k. The
   *  rows written must not share memory with kv, gate, position_bias or
   *  norm_weight. */
  void* out;
  swa_dtype_t out_dtype;       /**< Default SWA_DTYPE_FP32. */
  /** Rows of `out`, at least the plan's window count for the layer
   *  (swa_plan_compress_windows()); rows past it are not written. Default 0. */
  uint64_t out_rows;
  void* stream;                /**< cudaStream_t on the CUDA backend; ignored on the CPU. */
} swa_compress_args_t;

/** \brief Fill *args with the defaults listed on swa_compress_args_t.
 *  \param[out] args Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_compress_args_init(swa_compress_args_t* args);

/** \brief Run one compressor of one layer of a planned step (\ref sem_compress):
 *  compute the entry of every window that closes (swa_plan_compress_windows()),
 *  then store the new source rows into the compressor ring
 *  (swa_plan_compress_store_segments()).
 *
 *  Entry w = RoPE(RMSNorm(sum over its S slots of softmax over the slots of
 *  (gate + position_bias) times kv, per feature)), computed in FP32 as
 *  transformers' DeepseekV4HCACompressor / DeepseekV4CSACompressor (and the
 *  indexer's compressor) do: CSA slot j < c takes the Ca half (features
 *  0 ... d-1) of its row and position_bias row j, slot j >= c the Cb half
 *  (features d ... 2d-1) and bias row j - c; HCA slot j takes the row and bias
 *  row j; missing slots have zero weight; RMSNorm x * rsqrt(mean(x^2) + eps)
 *  * norm_weight; RoPE as compress_rope_dims says, at w * c.
 *
 *  Run each compressor of each compressed layer once per built plan, with or
 *  without swa_step() of the layer; like swa_step(), the first successful
 *  call makes the plan no longer cancellable. An engine that runs its own
 *  compressor kernel uses the plan queries and the view instead.
 *  \param[in,out] cache The cache the plan was created for.
 *  \param[in,out] plan A built plan of this cache.
 *  \param[in] args The layer, compressor and tensors.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for NULL tensors, a bad struct_size, unknown
 *  dtypes, a non-positive or non-finite norm_eps, a layer without a typed
 *  compressor or a compressor index it does not have (the message names it),
 *  out_rows below the window count, an out whose written rows share memory
 *  with an input (the message names both tensors and their byte ranges).
 *  \retval SWA_OUT_OF_RANGE for a layer id past the last layer.
 *  \retval SWA_FAILED_PRECONDITION for a plan not built, cancelled or of
 *  another cache, or whose slots were freed or are being saved or restored
 *  (as at swa_step()), or when this compressor of the layer already ran for
 *  this build of the plan (its store overwrote ring rows its windows read; the
 *  message names the layer and compressor). A failed run may be repeated.
 *  \retval SWA_UNIMPLEMENTED on a backend without the compressor kernel.
 *  Nothing is written on failure.
 *  \note Threading as swa_step(): the plan's slots are held during the call. */
SWA_API swa_status_t swa_compress_step(swa_cache_t* cache, swa_plan_t* plan,
                                       const swa_compress_args_t* args);

/** \brief Whether swa_slot_save() and swa_slot_save_at() of this cache carry the
 *  compression state (\ref sem_store_blob): with `enable` non-zero, each blob
 *  gets a compression section (blob format version 4, flag bit 1) holding the
 *  compressor rings (main and indexer) of every stored layer with a typed
 *  compressor, and a restore of such a blob writes them back, so the sequence
 *  continues exactly. A restore needs the saver's setting: a blob without the
 *  section read by a cache with the setting on (or the reverse) is refused
 *  (SWA_FAILED_PRECONDITION or SWA_DATA_LOSS naming the sizes), slot unchanged.
 *  Caches without typed compressors on stored layers save as before whatever
 *  the setting (format version 3). On by default. With `enable` = 0 the blobs
 *  leave the compressor rings out (version 3) and a restore leaves the slot's
 *  compressor rings as they were: the windows that close next would pool the
 *  slot's previous rows, so turn it off only when the engine refills the rings
 *  itself (swa_cache_compress_view()) before the next swa_compress_step().
 *  swa_slot_save_at() at a position whose compressor rows the rings no longer
 *  hold fails with SWA_OUT_OF_RANGE naming the layer.
 *  \param[in] cache The cache.
 *  \param[in] enable 0 or 1.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL or a value other than 0 and 1.
 *  \note Thread-safe; saves already running keep the setting they started with. */
SWA_API swa_status_t swa_cache_set_save_compression(swa_cache_t* cache, uint32_t enable);

/* ---- RoPE as a service -------------------------------------------------- */

/** \brief A layer's RoPE as the step applies it (\ref sem_rope), written by
 *  swa_rope_table(). */
typedef struct swa_rope_info {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_rope_info_t). */
  swa_rope_style_t style;     /**< The layer's rope_style (SWA_ROPE_NONE: no table). */
  uint32_t first_dim;         /**< First rotary dim of each head. */
  uint32_t dims;              /**< Rotary dims n; the table has n/2 frequencies. */
  /** What multiplies cos and sin of q and k (the resolved rope_attention_factor:
   *  YaRN's default where the layer gives 0). */
  float attention_factor;
  uint32_t derotate_output;   /**< 1: the step rotates its output back. */
} swa_rope_info_t;

/** \brief Read a layer's RoPE frequencies, the FP32 values every step of a
 *  cache with this layer rotates with (plain RoPE or YaRN, \ref sem_rope).
 *  \param[in] layer The layer description (validated as swa_cache_create()
 *  validates it).
 *  \param[out] inv_freq [capacity] floats: frequency i (angle = position *
 *  inv_freq[i], rounded to FP32) of rotary pair i. May be NULL when capacity
 *  is 0 (to read `info` only).
 *  \param[in] capacity Floats inv_freq holds; at least dims/2 when not 0.
 *  \param[out] info The style, slice and attention factor; may be NULL.
 *  \retval SWA_OK on success (a layer without RoPE: info->style NONE, dims 0,
 *  attention_factor 1; nothing is written to inv_freq).
 *  \retval SWA_INVALID_ARGUMENT for a NULL or invalid layer (the message names
 *  the field), a capacity below dims/2 (not 0), a NULL inv_freq with capacity
 *  > 0, a bad struct_size. Nothing is written then.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_rope_table(const swa_layer_desc_t* layer, float* inv_freq,
                                    uint32_t capacity, swa_rope_info_t* info);

/** \brief Arguments of swa_rope_apply(). Fill with swa_rope_args_init(). */
typedef struct swa_rope_args {
  size_t struct_size;         /**< sizeof(swa_rope_args_t), set by init. */
  /** The layer whose rotation to apply (style, slice, theta, YaRN, factor);
   *  its head_dim is the tensor's D. Borrowed for the call. */
  const swa_layer_desc_t* layer;
  void* x;                    /**< [tokens, heads, head_dim] in dtype, rotated in place. */
  swa_dtype_t dtype;          /**< SWA_DTYPE_FP32 or SWA_DTYPE_BF16. Default SWA_DTYPE_FP32. */
  uint32_t heads;             /**< Head vectors per token, >= 1. Default 1. */
  int64_t tokens;             /**< Rows of x, >= 0; 0 is a no-op. Default 0. */
  /** [tokens] int32 positions, each >= 0; host memory on every device (copied
   *  on `stream` for a CUDA device). Must not share memory with a host x. */
  const int32_t* positions;
  /** 0: rotate forward by each position with cos and sin times the attention
   *  factor (what the step does to q and the new keys); 1: rotate back by minus
   *  the position without the factor (what the step does to a de-rotated
   *  output). Default 0. */
  uint32_t inverse;
  /** -1 = x is host memory (rotated on the calling thread); d >= 0 = device
   *  memory of CUDA device d, rotated on `stream`. Default -1. */
  int32_t device;
  void* stream;               /**< cudaStream_t for device >= 0; ignored for -1. */
} swa_rope_args_t;

/** \brief Fill *args with the defaults listed on swa_rope_args_t (pointers NULL).
 *  \param[out] args Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_rope_args_init(swa_rope_args_t* args);

/** \brief Rotate a caller's tensor with a layer's RoPE, bit for bit as
 *  swa_step() rotates inside (\ref sem_rope_service): the same
 *  table (swa_rope_table()), angle, cos/sin and rounding. In FP32; a BF16 x
 *  is widened, rotated and rounded back to nearest even. Host rotations equal
 *  the CPU step's, device rotations the CUDA step's.
 *  \param[in] args The layer, tensor, positions and where x lives.
 *  \retval SWA_OK on success (a layer without RoPE leaves x as it is).
 *  \retval SWA_INVALID_ARGUMENT for a NULL args or layer, an invalid layer, a
 *  NULL x or positions with tokens > 0, a negative tokens, heads = 0, an
 *  unknown dtype, inverse not 0 or 1, a negative positions[t] (the message
 *  names t and the value), sizes that overflow, a device below -1 or that does
 *  not exist, a bad struct_size, a host x that shares memory with positions
 *  (the message names both and their byte ranges). Nothing is written then.
 *  \retval SWA_UNIMPLEMENTED for device >= 0 in a build without CUDA.
 *  \retval SWA_INTERNAL when a CUDA call fails (the message names it).
 *  \note Thread-safe; on a device the work is enqueued on args->stream. */
SWA_API swa_status_t swa_rope_apply(const swa_rope_args_t* args);

/* ---- Graph decode ------------------------------------------------------- */

/* Experimental: declared only under SWACACHE_EXPERIMENTAL (see the top of
 * this file and docs/api.md, "API stability"). */
#ifdef SWACACHE_EXPERIMENTAL

/** \brief A graph-capturable decode of one cache (\ref sem_graph_decode):
 *  planning from device arrays and every layer's step from that device plan,
 *  on the caller's stream, with no host synchronisation, allocation or
 *  host-device copy, so that a whole decode step can be captured in one CUDA
 *  graph and replayed with new lengths. Created by swa_decode_graph_create().
 *  On the CPU backend the same calls take host pointers and run synchronously.
 *  Declared only when SWACACHE_EXPERIMENTAL is defined before this header is
 *  included. The safe Rust, Go and Python bindings do not wrap these calls.
 *  \warning Experimental: may change before 1.0. */
typedef struct swa_decode_graph swa_decode_graph_t;

/** \brief Why the graph decode refused a sequence (values pinned). */
typedef enum swa_graph_error_reason {
  SWA_GRAPH_OK = 0,                    /**< No refused sequence since the last reset. */
  SWA_GRAPH_SLOT_OUT_OF_RANGE = 1,     /**< Slot id below -1 or past max_slots. */
  SWA_GRAPH_SLOT_NOT_IMPORTED = 2,     /**< Slot not imported into this graph (or released). */
  SWA_GRAPH_SEQLEN_K_OUT_OF_RANGE = 3, /**< seqlen_k - tokens_per_seq is below 0 or valid_start. */
  SWA_GRAPH_GAP = 4,                   /**< q_start past the slot's written_end (a forward jump). */
  SWA_GRAPH_REWIND_TOO_DEEP = 5,       /**< The ring no longer holds the oldest key needed. */
  SWA_GRAPH_DUPLICATE_SLOT = 6         /**< An earlier sequence of the batch has the same slot. */
} swa_graph_error_reason_t;

/** \brief The error record of a graph: the first refused sequence since the
 *  last swa_decode_graph_reset_error(). Lives in backend memory (device memory
 *  on CUDA); see swa_decode_graph_error_record(). Plain int32 fields. */
typedef struct swa_graph_error {
  int32_t reason;      /**< A swa_graph_error_reason_t; SWA_GRAPH_OK = no error. */
  int32_t seq;         /**< Batch index of the first refused sequence of that step. */
  int32_t slot;        /**< Its slot id as given. */
  int32_t seqlen_k;    /**< Its seqlen_k as given. */
  int32_t written_end; /**< The graph's written_end of that slot then; -1 when out of range. */
  int32_t ring_high;   /**< The graph's highest stored position + 1 of that slot; -1 likewise. */
} swa_graph_error_t;

/** \brief Create a graph decode for `cache` with fixed sizes.
 *
 *  All memory the graph needs (its copy of the slot lengths, the plan arrays,
 *  the error record) is allocated here, once.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] cache Borrowed; must outlive the graph. Every layer must have
 *  rope_style = SWA_ROPE_NONE (rotate q and k in the engine).
 *  \param[in] max_seqs Sequences per planned step, padding included (>= 1).
 *  \param[in] tokens_per_seq New tokens of every sequence of every step, in
 *  [1, R - W + 1] (1 = plain decode, N + 1 = speculative verify).
 *  \param[out] out The new graph; destroy with swa_decode_graph_destroy().
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for NULL pointers, max_seqs = 0, tokens_per_seq
 *  outside [1, R - W + 1], sizes that overflow int32 indices.
 *  \retval SWA_UNIMPLEMENTED when a layer has RoPE inside the step, or the
 *  backend cannot run the graph decode (a CUDA head dim without kernels).
 *  \retval SWA_RESOURCE_EXHAUSTED when memory runs out.
 *  \note Thread-safe with respect to other graphs; the cache is only read. */
SWA_API swa_status_t swa_decode_graph_create(swa_cache_t* cache, uint32_t max_seqs,
                                             uint32_t tokens_per_seq, swa_decode_graph_t** out);

/** \brief Destroy a graph (NULL is ignored). A captured CUDA graph that uses
 *  it must not be launched afterwards; wait for launches in flight first.
 *  Releases the graph's hold on every slot it still holds
 *  (swa_decode_graph_import()); the cache must still exist.
 *  \warning Experimental: may change before 1.0.
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API void swa_decode_graph_destroy(swa_decode_graph_t* graph);

/** \brief Hand slots to the graph: copy their lengths (written_end,
 *  valid_start) from the host slot table into the graph's copy and mark them
 *  device-advanced in the slot table.
 *
 *  From now on graph steps may move these slots; until swa_slot_set_lengths()
 *  reports their lengths, swa_plan_build(), swa_step() with an older plan,
 *  swa_slot_save(), swa_slot_restore(), swa_slot_copy(),
 *  swa_slot_set_valid_start() and swa_slot_begin_replay() on them fail with
 *  SWA_FAILED_PRECONDITION naming the slot.
 *
 *  The graph also *holds* the slots until swa_decode_graph_release() or
 *  swa_decode_graph_destroy(), whatever swa_slot_set_lengths() says: while any
 *  graph holds a slot, every call that would give it another owner or replace
 *  its content fails with SWA_FAILED_PRECONDITION naming the slot and the way
 *  out (swa_slot_free(), swa_slot_reset(), swa_slot_copy() into it,
 *  swa_slot_restore() into it, swa_slot_begin_replay(),
 *  swa_slot_set_valid_start()), so a graph step never writes a ring that
 *  changed hands. Reads (copy from it, save) and the owner's host-planned
 *  steps are allowed once its lengths are host-known. Importing a slot again
 *  into a graph that holds it refreshes the graph's copy (after a host-planned
 *  step); several graphs may hold one slot (each import needs the slot not
 *  device-advanced).
 *  Set-up call: not capturable (on CUDA it copies from the host, ordered on
 *  `stream`, and may wait for the stream before the copy).
 *  \warning Experimental: may change before 1.0.
 *  \param[in,out] graph The graph.
 *  \param[in] slots Host array [n] of distinct slot ids, borrowed for the call.
 *  \param[in] n Number of slots (0 is a no-op).
 *  \param[in] stream cudaStream_t on CUDA; ignored on the CPU.
 *  \retval SWA_OK on success; nothing changes on any error.
 *  \retval SWA_INVALID_ARGUMENT for NULL pointers or a repeated slot.
 *  \retval SWA_OUT_OF_RANGE for a slot past the pool.
 *  \retval SWA_FAILED_PRECONDITION for a slot not allocated, being saved or
 *  restored, or already device-advanced.
 *  \note Not thread-safe with other calls on the same graph; thread-safe with
 *  respect to the slot table (it locks it). */
SWA_API swa_status_t swa_decode_graph_import(swa_decode_graph_t* graph, const uint32_t* slots,
                                             size_t n, void* stream);

/** \brief Take slots back from the graph: later graph steps naming them refuse
 *  the sequence (SWA_GRAPH_SLOT_NOT_IMPORTED), and the graph's hold on them
 *  ends (swa_decode_graph_import()). Release before freeing, resetting or
 *  overwriting a slot. A slot the graph does not hold is no error. A
 *  device-advanced slot stays so until swa_slot_set_lengths() (it may be freed
 *  or reset without). Set-up call, ordered on `stream`, not capturable: graph
 *  work enqueued before it, on this or another stream, may still write the
 *  slot, so order it before the slot's next owner uses it.
 *  \warning Experimental: may change before 1.0.
 *  \param[in,out] graph The graph.
 *  \param[in] slots Host array [n] of slot ids, borrowed for the call.
 *  \param[in] n Number of slots.
 *  \param[in] stream cudaStream_t on CUDA; ignored on the CPU.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for NULL pointers.
 *  \retval SWA_OUT_OF_RANGE for a slot past the pool (nothing changes).
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API swa_status_t swa_decode_graph_release(swa_decode_graph_t* graph, const uint32_t* slots,
                                              size_t n, void* stream);

/** \brief Plan one decode step from arrays in backend memory (device memory on
 *  CUDA, host memory on the CPU); capturable.
 *
 *  Sequence i has `tokens_per_seq` new tokens at rows i * tokens_per_seq ... of
 *  every layer's tensors and q_start = seqlen_k[i] - tokens_per_seq; its
 *  valid_start is the one the graph imported (not an input). slots[i] = -1
 *  marks padding: its rows are written as zeros, it is no error. A sequence
 *  the graph refuses (see \ref sem_graph_decode; slot out of range or not
 *  imported, a repeated slot, seqlen_k out of range, a gap, a rewind deeper
 *  than the ring keeps) is treated as padding and the first one is written to
 *  the error record; the other sequences run. A valid sequence advances the
 *  graph's copy of its slot (written_end = seqlen_k).
 *  Enqueued on `stream` with no host synchronisation, no allocation and no
 *  copy; the arrays are read when the stream runs the planner, so a captured
 *  graph reads whatever they hold at each launch. On the CPU it runs now.
 *  \warning Experimental: may change before 1.0.
 *  \param[in,out] graph The graph.
 *  \param[in] slots [n_seqs] int32 slot ids or -1, borrowed until the stream
 *  has run the planner.
 *  \param[in] seqlen_k [n_seqs] int32 sequence lengths after this step's tokens.
 *  \param[in] n_seqs Sequences, in [0, max_seqs]; fixed for a captured graph.
 *  \param[in] stream cudaStream_t on CUDA; ignored on the CPU.
 *  \retval SWA_OK when enqueued (bad sequences are reported by the error
 *  record, not here).
 *  \retval SWA_INVALID_ARGUMENT for a NULL graph, NULL arrays with n_seqs > 0,
 *  n_seqs > max_seqs.
 *  \retval SWA_INTERNAL or SWA_UNAVAILABLE for a failed kernel launch.
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API swa_status_t swa_decode_graph_plan(swa_decode_graph_t* graph, const int32_t* slots,
                                           const int32_t* seqlen_k, uint32_t n_seqs,
                                           void* stream);

/** \brief Run one layer of the last planned step; capturable.
 *
 *  swa_step()'s work for the device plan: the new K/V of every valid sequence
 *  are encoded into its ring rows, then each of its tokens attends (sinks,
 *  soft-cap and lse as in swa_step()). Rows of padding and refused sequences
 *  are written as zeros in out and -inf in lse (the LSE of a row that saw no
 *  key, so that swa_attention_merge() gives them no weight); nothing of theirs
 *  reaches the ring.
 *  Outputs equal those of swa_plan_build() + swa_step() over the valid
 *  sequences, bit for bit on the same backend. Run every layer once per plan.
 *  \warning Experimental: may change before 1.0.
 *  \param[in,out] graph A graph with a planned step.
 *  \param[in] args The layer and its tensors ([n_seqs * tokens_per_seq, ...]
 *  rows, backend memory), and the stream (ignored on the CPU).
 *  \retval SWA_OK when enqueued.
 *  \retval SWA_INVALID_ARGUMENT for NULL tensors, v_new or sinks that do not
 *  match the layer, unknown dtypes, a bad softmax_scale or struct_size, a
 *  non-NULL positions (the graph decode rotates by cache positions only: its
 *  captured work cannot read host positions; see \ref sem_rope_positions),
 *  or an out or lse that shares memory with another argument as at swa_step()
 *  (extents: n_seqs * tokens_per_seq rows of the last plan).
 *  \retval SWA_OUT_OF_RANGE for a layer past the last.
 *  \retval SWA_FAILED_PRECONDITION when no step has been planned.
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API swa_status_t swa_decode_graph_step(swa_decode_graph_t* graph,
                                           const swa_step_args_t* args);

/** \brief The graph's error record in backend memory (device memory on CUDA,
 *  host memory on the CPU), for an engine that reads it asynchronously (e.g.
 *  cudaMemcpyAsync into pinned memory). It is written by the planner in
 *  stream order and kept until swa_decode_graph_reset_error().
 *  \warning Experimental: may change before 1.0.
 *  \return A pointer owned by the graph, valid until it is destroyed; NULL for
 *  a NULL graph.
 *  \note Thread-safe. */
SWA_API const swa_graph_error_t* swa_decode_graph_error_record(const swa_decode_graph_t* graph);

/** \brief Read the error record as a status. On CUDA this waits for `stream`
 *  (not capturable): call it outside the graph, e.g. once per step or when
 *  outputs look wrong.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] graph The graph.
 *  \param[in] stream cudaStream_t on CUDA; ignored on the CPU.
 *  \param[out] record Optional copy of the record (NULL = not wanted).
 *  \retval SWA_OK when no sequence was refused since the last reset.
 *  \retval SWA_INVALID_ARGUMENT when the first refused sequence had a slot out
 *  of range, a repeated slot or seqlen_k out of range;
 *  \retval SWA_FAILED_PRECONDITION when it had a slot not imported, a gap or a
 *  rewind too deep. The message names the sequence, its slot, its numbers and
 *  the reason.
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API swa_status_t swa_decode_graph_check(swa_decode_graph_t* graph, void* stream,
                                            swa_graph_error_t* record);

/** \brief Clear the error record, ordered on `stream` (capturable on CUDA).
 *  \warning Experimental: may change before 1.0.
 *  \retval SWA_OK on success; SWA_INVALID_ARGUMENT for a NULL graph.
 *  \note Not thread-safe with other calls on the same graph. */
SWA_API swa_status_t swa_decode_graph_reset_error(swa_decode_graph_t* graph, void* stream);

/** \brief Report the lengths of slots a graph decode advanced, once the engine
 *  knows them (a zero-overhead scheduler knows them a step later).
 *
 *  Clears the device-advanced mark (swa_decode_graph_import()). written_end is
 *  the last graph step's seqlen_k less the tokens the engine rejected in that
 *  step (not a deeper rewind: express that by the next step's seqlen_k). The
 *  host then assumes the ring may hold up to R - W + 1 positions past
 *  written_end, so a host-planned step may start at written_end but not
 *  rewind below it. The graph's own copy is not changed, and the graph keeps
 *  holding the slot (swa_decode_graph_import()). On a slot that is not
 *  device-advanced it may only rewind (written_end no higher than the
 *  positions its ring holds). All-or-nothing.
 *  \warning Experimental: may change before 1.0.
 *  \param[in,out] cache The cache.
 *  \param[in] slots Host array [n] of distinct slot ids.
 *  \param[in] written_end Host array [n]: one past the last valid position.
 *  \param[in] valid_start Host array [n] or NULL (keep each slot's); never lower
 *  than the slot's and never above written_end.
 *  \param[in] n Number of slots.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for NULL arrays, a repeated slot, written_end
 *  below valid_start, a valid_start below the slot's, or positions that
 *  overflow.
 *  \retval SWA_OUT_OF_RANGE for a slot past the pool.
 *  \retval SWA_FAILED_PRECONDITION for a slot not allocated or busy, or one not
 *  device-advanced moved past what its ring holds. Messages name the slot.
 *  \note Thread-safe (locks the slot table). */
SWA_API swa_status_t swa_slot_set_lengths(swa_cache_t* cache, const uint32_t* slots,
                                          const int32_t* written_end, const int32_t* valid_start,
                                          size_t n);

#endif /* SWACACHE_EXPERIMENTAL */

/* ---- Codec -------------------------------------------------------------- */

/** \brief Bytes of one stored vector of `dim` values in `format` (\ref sem_slot_layout):
 *  MXFP8 `dim + dim/32`, BF16 `2*dim`, FP32 `4*dim`, FP8_DS_MLA 584 (dim 512 only).
 *  \warning Experimental: may change before 1.0.
 *  \param[in] format A swa_format_t value.
 *  \param[in] dim Values per vector: a positive multiple of 32, at most 16384.
 *  \param[out] out Receives the byte count; unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for an unknown format, a bad dim (any
 *  dim but 512 for FP8_DS_MLA) or NULL out.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_format_vector_bytes(swa_format_t format, uint32_t dim, uint32_t* out);

/** \brief Encode `n_vectors` contiguous vectors into the stored form of `format`
 *  (\ref sem_mxfp8 for MXFP8), exactly as the cache stores KV vectors.
 *
 *  MXFP8: each vector becomes `dim` E4M3 codes followed by `dim/32` E8M0 scales;
 *  a 32-value block holding a NaN or Inf gets scale 0xFF and codes 0x7F. BF16:
 *  round to nearest even (NaN kept, quietened). FP32: the values as they are.
 *  FP8_DS_MLA (dim 512): the NoPE dims 0..447 in 64-value groups, E4M3 codes
 *  under a power-of-two scale, the RoPE dims 448..511 as BF16; a group holding
 *  a NaN or Inf gets scale 0xFF and codes 0x7F; its scale rule is fixed, so
 *  `mode` is ignored.
 *  Results are bit-identical on every CPU path and on the CUDA kernels.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] format Stored format.
 *  \param[in] mode MXFP8 scale rule (ignored, but still validated, for the other formats).
 *  \param[in] src `n_vectors * dim` values of `src_dtype`, aligned to their type.
 *  Borrowed for the call.
 *  \param[in] src_dtype SWA_DTYPE_FP32 or SWA_DTYPE_BF16.
 *  \param[in] n_vectors Number of vectors; 0 is a no-op (pointers may then be NULL).
 *  \param[in] dim Values per vector: a positive multiple of 32, at most 16384.
 *  \param[out] dst `n_vectors * swa_format_vector_bytes(format, dim)` bytes,
 *  aligned to 4 (FP32) or 2 (BF16) for those formats; must not overlap src.
 *  \param[out] nonfinite_blocks Optional (NULL allowed): receives the number of
 *  32-value blocks that contained a NaN or Inf (FP8_DS_MLA: 64-value NoPE
 *  groups and 32-value halves of the RoPE part).
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for an unknown enum value, a bad dim, a NULL or
 *  misaligned buffer, overlapping buffers or a size that overflows; nothing is
 *  written then.
 *  \see \ref md_docs_codec "docs/codec.md".
 *  \note Thread-safe; runs on the calling thread. Assumes the default floating
 *  point environment (no flush-to-zero / denormals-are-zero). */
SWA_API swa_status_t swa_codec_encode(swa_format_t format, swa_scale_mode_t mode,
                                      const void* src, swa_dtype_t src_dtype,
                                      size_t n_vectors, uint32_t dim, void* dst,
                                      uint64_t* nonfinite_blocks);

/** \brief Decode `n_vectors` contiguous stored vectors of `format` into values.
 *
 *  MXFP8: `e4m3(code) * 2^(scale - 127)`, exact in FP32 (subnormal results
 *  included); a block with scale 0xFF, and any NaN code, decodes to the quiet
 *  NaN 0x7FC00000 (BF16 0x7FC0). Scale bytes above 247, which the encoder never
 *  writes, may overflow to +-Inf. BF16 output rounds to nearest even.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] format Stored format.
 *  \param[in] src `n_vectors * swa_format_vector_bytes(format, dim)` bytes,
 *  aligned to 4 (FP32) or 2 (BF16) for those formats. Borrowed for the call.
 *  \param[in] n_vectors Number of vectors; 0 is a no-op (pointers may then be NULL).
 *  \param[in] dim Values per vector: a positive multiple of 32, at most 16384.
 *  \param[out] dst `n_vectors * dim` values of `dst_dtype`, aligned to their
 *  type; must not overlap src.
 *  \param[in] dst_dtype SWA_DTYPE_FP32 or SWA_DTYPE_BF16.
 *  \param[out] nonfinite_blocks Optional (NULL allowed): receives the number of
 *  blocks that decode to NaN/Inf markers: MXFP8 blocks with scale 0xFF, BF16 and
 *  FP32 32-value blocks holding a NaN or Inf; FP8_DS_MLA 64-value NoPE groups
 *  with scale 0xFF and 32-value halves of the RoPE part holding a NaN or Inf.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT as for swa_codec_encode(); nothing is written then.
 *  \note Thread-safe; runs on the calling thread. */
SWA_API swa_status_t swa_codec_decode(swa_format_t format, const void* src, size_t n_vectors,
                                      uint32_t dim, void* dst, swa_dtype_t dst_dtype,
                                      uint64_t* nonfinite_blocks);

/** \brief MXFP8 shorthand for swa_codec_encode(SWA_FORMAT_MXFP8, mode, ...).
 *  \warning Experimental: may change before 1.0.
 *  \param[in] src `n_vectors * dim` values of `src_dtype`, aligned to their type.
 *  \param[in] src_dtype SWA_DTYPE_FP32 or SWA_DTYPE_BF16.
 *  \param[in] n_vectors Number of vectors; 0 is a no-op.
 *  \param[in] dim Values per vector: a positive multiple of 32, at most 16384.
 *  \param[in] mode SWA_SCALE_CEIL (the cache default) or SWA_SCALE_FLOOR.
 *  \param[out] dst `n_vectors * (dim + dim/32)` bytes; must not overlap src.
 *  \param[out] nonfinite_blocks Optional: blocks that got scale 0xFF.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT as for swa_codec_encode().
 *  \note Thread-safe. */
SWA_API swa_status_t swa_mxfp8_encode(const void* src, swa_dtype_t src_dtype, size_t n_vectors,
                                      uint32_t dim, swa_scale_mode_t mode, uint8_t* dst,
                                      uint64_t* nonfinite_blocks);

/** \brief MXFP8 shorthand for swa_codec_decode(SWA_FORMAT_MXFP8, ...).
 *  \warning Experimental: may change before 1.0.
 *  \param[in] src `n_vectors * (dim + dim/32)` bytes.
 *  \param[in] n_vectors Number of vectors; 0 is a no-op.
 *  \param[in] dim Values per vector: a positive multiple of 32, at most 16384.
 *  \param[out] dst `n_vectors * dim` values of `dst_dtype`; must not overlap src.
 *  \param[in] dst_dtype SWA_DTYPE_FP32 or SWA_DTYPE_BF16.
 *  \param[out] nonfinite_blocks Optional: blocks whose scale is 0xFF.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT as for swa_codec_decode().
 *  \note Thread-safe. */
SWA_API swa_status_t swa_mxfp8_decode(const uint8_t* src, size_t n_vectors, uint32_t dim,
                                      void* dst, swa_dtype_t dst_dtype,
                                      uint64_t* nonfinite_blocks);

/** \brief Name of the CPU codec path this process uses: "avx512", "avx2" or
 *  "scalar" (the best one the CPU supports). The environment variable
 *  SWACACHE_CODEC, read once at first use, forces one: "scalar", "avx2" or
 *  "avx512" (a forced path the CPU lacks falls back to the next one down).
 *  All paths give identical bytes.
 *  \warning Experimental: may change before 1.0.
 *  \return A static string; never NULL.
 *  \note Thread-safe. */
SWA_API const char* swa_codec_cpu_path(void);

/** \brief Name of the CPU attention path swa_step() takes in this process for
 *  queries of `q_dtype` (docs/cpu_attention.md, "Paths").
 *
 *  SWA_DTYPE_BF16 (on an MXFP8 or BF16 layer without RoPE; other layers take
 *  the FP32 path): "amx_bf16" (AMX-BF16 tiles), "avx512_bf16" (AVX512-BF16),
 *  or the FP32 path's name where BF16 queries are widened to FP32 (a CPU
 *  without those, or an Intel CPU without usable AMX, whose vdpbf16ps is
 *  slower than its FP32 FMAs). SWA_DTYPE_FP32: "avx512_wide" (AVX-512 with
 *  32-column register tiles, Intel), "avx512", "avx2_fma" or "portable".
 *  Decided from the CPU, the tile data Linux grants this process for AMX
 *  (asked for once, by this call or the first step that could use it) and
 *  SWACACHE_ATTENTION ("portable", "avx2", "avx512", "bf16", "amx"; read
 *  once).
 *  \warning Experimental: may change before 1.0.
 *  \param[in] q_dtype SWA_DTYPE_FP32 or SWA_DTYPE_BF16.
 *  \param[out] name A static string (never freed, never NULL on success).
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for another q_dtype or a NULL name
 *  (then *name is unchanged).
 *  \note Thread-safe. */
SWA_API swa_status_t swa_attention_cpu_path(swa_dtype_t q_dtype, const char** name);

/* ---- Store -------------------------------------------------------------- */

/** \brief Most bytes of an engine key passed to swa_slot_save() and friends. */
#define SWA_STORE_MAX_KEY_BYTES 1024

/** \brief Size of the message buffer the library hands to every store callback. */
#define SWA_STORE_MESSAGE_BYTES 256

/** \brief One buffer of a scattered blob, like POSIX `struct iovec`.
 *  The library fills these for its store callbacks. A plain array element
 *  without struct_size (like swa_segment_t): its layout is fixed. */
typedef struct swa_iov {
  void* data;                 /**< Start of the buffer (host memory). */
  size_t size;                /**< Bytes in the buffer. */
} swa_iov_t;

/** \brief External KV store: a callback table implemented by the engine (or
 *  returned by a built-in store constructor) and handed to swa_cache_set_store().
 *  Fill with swa_kv_store_init() first.
 *  \see \ref md_docs_store "docs/store.md" (blob format, built-in stores).
 *
 *  Keys are byte strings (not NUL-terminated). The library passes the engine's
 *  key prefixed with the cache's layout fingerprint as 16 lowercase hex digits
 *  and a colon (`"0123456789abcdef:" + key`), so that two models never collide.
 *
 *  Every callback returns a swa_status_t. On failure it may write a
 *  NUL-terminated explanation into `message` (capacity `message_cap`, at least
 *  SWA_STORE_MESSAGE_BYTES); the library copies it into its own error message.
 *  Status values outside swa_status_t are reported as SWA_UNKNOWN.
 *
 *  Threading: callbacks run synchronously on the thread that called
 *  swa_slot_save(), swa_slot_restore(), swa_cache_store_exists() or
 *  swa_cache_store_remove(); when the engine calls those from several threads,
 *  callbacks run concurrently and the store must be thread-safe. No library
 *  lock is held during a callback, so a callback may call the library (even
 *  swa_cache_set_store() on the same cache), but not swa_cache_destroy() on the
 *  cache that is calling it.
 *
 *  Buffers (keys, iov arrays and the memory they describe, `message`) are
 *  borrowed for the duration of the call only.
 *
 *  A NULL entry means "not supported": the call that needs it fails with
 *  SWA_UNIMPLEMENTED. `release` may be NULL when user_data needs no cleanup. */
typedef struct swa_kv_store {
  size_t struct_size;         /**< sizeof(swa_kv_store_t), set by swa_kv_store_init(). */
  void* user_data;            /**< Passed as the first argument of every callback. */
  /** Store a blob given as `n_iov` buffers to be concatenated (read-only). The
   *  write must be all-or-nothing for readers, and replaces any blob under the
   *  key. Returns SWA_OK, or e.g. SWA_RESOURCE_EXHAUSTED, SWA_UNAVAILABLE. */
  swa_status_t (*put)(void* user_data, const uint8_t* key, size_t key_len,
                      const swa_iov_t* iov, size_t n_iov, char* message, size_t message_cap);
  /** Read a blob into `n_iov` caller-provided buffers. On entry `*blob_size`
   *  holds the buffers' total size. When the blob has exactly that size, fill
   *  the buffers in order and return SWA_OK. When it has another size, set
   *  `*blob_size` to the blob's true size and return SWA_OK (the buffers'
   *  contents are then ignored). A missing key returns SWA_NOT_FOUND. */
  swa_status_t (*get)(void* user_data, const uint8_t* key, size_t key_len,
                      const swa_iov_t* iov, size_t n_iov, uint64_t* blob_size, char* message,
                      size_t message_cap);
  /** Set `*exists` to 1 when a blob is stored under the key, else 0. */
  swa_status_t (*exists)(void* user_data, const uint8_t* key, size_t key_len, uint32_t* exists,
                         char* message, size_t message_cap);
  /** Delete the blob under the key; SWA_NOT_FOUND when there is none. */
  swa_status_t (*remove)(void* user_data, const uint8_t* key, size_t key_len, char* message,
                         size_t message_cap);
  /** Called exactly once when the library drops the store: when another store
   *  replaces it, when it is detached, or when the cache is destroyed (on the
   *  thread that drops the last reference). */
  void (*release)(void* user_data);
} swa_kv_store_t;

/** \brief Fill *store with struct_size and NULL entries.
 *  \param[out] store Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_kv_store_init(swa_kv_store_t* store);

/** \brief Attach an external KV store to a cache, or detach it (store = NULL).
 *  \param[in] cache The cache.
 *  \param[in] store The callback table, copied; the library takes ownership of
 *  store->user_data on success (and calls release once when it drops it). On
 *  failure ownership stays with the caller. NULL detaches the current store.
 *  A table filled by a built-in swa_store_<kind>_create() and passed unchanged
 *  is recognised: the cache then calls the built-in store directly, not through
 *  the callbacks (same behaviour; the table's release is not called, the cache
 *  destroys the store itself, once).
 *  A built-in table is handed over once: the library keeps a registry of the
 *  live built-in stores and refuses a table whose store a cache or a tiered
 *  store already owns, or whose store was already released (by its release,
 *  or by the cache or tiered store that owned it; the address is looked up,
 *  never dereferenced). The refusal changes nothing: the first owner keeps
 *  the store, and this call takes nothing. For an engine's own table the
 *  library cannot tell: handing one user_data over twice (to two caches, or
 *  to a cache and a tiered store) without a reference count of your own is
 *  the caller's error, and it is released twice.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for a NULL cache, a bad struct_size, a table
 *  with neither put nor get, or a built-in table already owned by a cache or a
 *  tiered store, or already released (the message names the table's
 *  user_data).
 *  \note Thread-safe. A save or restore already running keeps the store it
 *  started with; the replaced store is released when the last of them ends. */
SWA_API swa_status_t swa_cache_set_store(swa_cache_t* cache, const swa_kv_store_t* store);

/** \brief Persist the stored region of a slot (\ref sem_store_blob) under `key`:
 *  one blob with a header (magic, version, layout fingerprint, written_end,
 *  valid_start, the highest position stored so far, payload length, CRC32C)
 *  followed by the stored bytes. Call it between steps: a built plan has
 *  already advanced written_end, so a save after swa_plan_build() and before
 *  every layer of that build has stepped (or the plan was cancelled) records
 *  rows that are not written yet (not detected: \ref sem_slot_lifecycle).
 *  \see \ref md_docs_store "docs/store.md", \ref sem_store_blob.
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot.
 *  \param[in] key Engine key bytes, borrowed for the call.
 *  \param[in] key_len 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \retval SWA_OK on success.
 *  \retval SWA_FAILED_PRECONDITION when no store is attached, the slot is not
 *  allocated, a restore of the slot is running, or a swa_step() that uses it
 *  is running (see swa_step()).
 *  \retval SWA_OUT_OF_RANGE for a bad slot id.
 *  \retval SWA_INVALID_ARGUMENT for a NULL cache or key, or a bad key_len.
 *  \retval SWA_UNIMPLEMENTED when the store has no put; else the store's error.
 *  \note Thread-safe. No library lock is held during the put. While the call
 *  reads the slot (for the whole put on a host pool, for the copy to host on a
 *  device pool) the slot is busy: swa_slot_free(), swa_slot_reset(),
 *  swa_slot_copy(), swa_slot_set_valid_start(), swa_slot_begin_replay(),
 *  swa_plan_build() and swa_plan_cancel() naming it, and a restore into it, fail
 *  with SWA_FAILED_PRECONDITION ("slot N is being saved/restored"); other slots
 *  are unaffected, and several saves of one slot may run at once; a step
 *  naming it fails too, so no step writes the slot during the call. */
SWA_API swa_status_t swa_slot_save(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                   size_t key_len);

/** \brief The checkpoint positions a slot can be saved at now
 *  (\ref sem_checkpoint): every `c` with `lo <= c <= hi` is accepted by
 *  swa_slot_save_at(). `hi` is the slot's written_end; `lo` is the smallest
 *  `c >= valid_start` whose window history `c - W + 1 ... c - 1` the ring still
 *  holds. With `high` = one past the highest position the rings hold (at
 *  least written_end): `lo = max(0, valid_start)` while `high - R` is not above
 *  that, else `high - (R - W + 1)`. With typed compressors, `lo` is also at
 *  least the smallest `c` from which on every compressor ring (of every layer,
 *  the compression state saved or not: swa_plan_build() checks them on the
 *  restored slot too) still holds the open window (\ref sem_checkpoint). A slot with
 *  nothing saveable (valid_start > written_end, a slot prepared for replay)
 *  gives lo > hi.
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot.
 *  \param[out] lo Receives the lowest checkpoint position; may be NULL.
 *  \param[out] hi Receives the highest (written_end); may be NULL.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for a NULL cache; SWA_OUT_OF_RANGE
 *  for a bad slot id; SWA_FAILED_PRECONDITION for a slot that is not allocated
 *  or device-advanced.
 *  \note Thread-safe (internally locked). */
SWA_API swa_status_t swa_slot_checkpoint_range(const swa_cache_t* cache, uint32_t slot,
                                               int32_t* lo, int32_t* hi);

/** \brief Save a checkpoint: the slot's state as it stood at an earlier
 *  position `position` (\ref sem_checkpoint), under `key`. The blob is the one
 *  swa_slot_save() writes except that it records written_end = `position`
 *  (ring_high keeps the highest position the rings hold), so a restore of it
 *  gives a slot whose written_end is `position`, and steps continuing from
 *  there compute exactly what the sequence computed the first time. It lets an
 *  engine checkpoint at fixed multiples of an interval while prefilling in
 *  chunks that do not end on them. `position` = written_end is swa_slot_save().
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot.
 *  \param[in] position c, within swa_slot_checkpoint_range(): the ring still
 *  holds positions c - W + 1 ... c - 1, and valid_start <= c <= written_end.
 *  \param[in] key Engine key bytes, borrowed for the call.
 *  \param[in] key_len 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \retval SWA_OK on success.
 *  \retval SWA_OUT_OF_RANGE for a position outside the reachable range (the
 *  message names the range `lo ... hi`), or a bad slot id.
 *  \retval other The codes of swa_slot_save().
 *  On failure neither the slot nor the store changed (a store's failed put is
 *  never visible, docs/store.md).
 *  \note Thread-safe, as swa_slot_save(). */
SWA_API swa_status_t swa_slot_save_at(swa_cache_t* cache, uint32_t slot, int32_t position,
                                      const uint8_t* key, size_t key_len);

/** \brief Restore a slot from the blob saved under `key`. The blob is read into
 *  a staging buffer and verified in full (magic, version, fingerprint, key,
 *  sizes, checksum) before the slot's stored region, written_end and valid_start
 *  are overwritten. Dropped layers are left as they are; the compression state
 *  too, unless the cache saves it (swa_cache_set_save_compression()): the
 *  blob's compression section is then written back.
 *  \see \ref md_docs_store "docs/store.md".
 *  \param[in] cache The cache.
 *  \param[in] slot An allocated slot.
 *  \param[in] key Engine key bytes, borrowed for the call.
 *  \param[in] key_len 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \retval SWA_OK on success.
 *  \retval SWA_NOT_FOUND when no blob is stored under the key.
 *  \retval SWA_DATA_LOSS for a corrupt or truncated blob, or a blob saved under
 *  another key (copied or renamed to this one).
 *  \retval SWA_FAILED_PRECONDITION for a blob of another layout or format
 *  version, when no store is attached, the slot is not allocated, is being
 *  saved/restored, is used by a running swa_step(), is device-advanced or is
 *  held by a decode graph (checked
 *  before any store I/O and again before the copy: release it first, as at
 *  swa_slot_free()), or the slot was freed (and perhaps allocated again) while
 *  the blob was read: the restore then belongs to no owner and writes nothing.
 *  \retval SWA_OUT_OF_RANGE for a bad slot id.
 *  \retval SWA_INVALID_ARGUMENT for a NULL cache or key, or a bad key_len.
 *  \retval other The store's error.
 *  On any failure the slot is byte-for-byte unchanged.
 *  \note Thread-safe. No library lock is held during the get or the copy into
 *  the slot. The slot stays free to use while the blob is read; during the copy
 *  it is busy, as described at swa_slot_save() (calls naming it fail with
 *  SWA_FAILED_PRECONDITION, other slots are unaffected, a step naming it fails
 *  too). */
SWA_API swa_status_t swa_slot_restore(swa_cache_t* cache, uint32_t slot, const uint8_t* key,
                                      size_t key_len);

/** \brief Ask the attached store whether a blob is stored under `key`.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] cache The cache.
 *  \param[in] key Engine key bytes (prefixed like swa_slot_save() does).
 *  \param[in] key_len 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \param[out] exists Receives 1 or 0; unchanged on failure.
 *  \retval SWA_OK; SWA_FAILED_PRECONDITION without a store; SWA_UNIMPLEMENTED when
 *  the store has no exists; SWA_INVALID_ARGUMENT; else the store's error.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_store_exists(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len, uint32_t* exists);

/** \brief Delete the blob stored under `key` from the attached store.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] cache The cache.
 *  \param[in] key Engine key bytes (prefixed like swa_slot_save() does).
 *  \param[in] key_len 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \retval SWA_OK; SWA_NOT_FOUND; SWA_FAILED_PRECONDITION without a store;
 *  SWA_UNIMPLEMENTED when the store has no remove; SWA_INVALID_ARGUMENT.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_store_remove(swa_cache_t* cache, const uint8_t* key,
                                            size_t key_len);

/** \brief Longest-prefix probe: of `n_keys` candidate keys of one request,
 *  ordered longest prefix first (one per checkpoint interval), find the first
 *  one the attached store holds. A store that can answer many keys in one
 *  round trip does (the Redis store: one pipeline of EXISTS commands; Redis
 *  Cluster: one pipeline per master); the others (memory, directory, tiered,
 *  an engine's table) are asked key by key, stopping at the first hit
 *  (docs/store.md, "Longest-prefix probe").
 *  \warning Experimental: may change before 1.0.
 *  \param[in] cache The cache.
 *  \param[in] keys `n_keys` engine keys (prefixed like swa_slot_save() does),
 *  borrowed for the call.
 *  \param[in] key_lens Their lengths, each 1 ... SWA_STORE_MAX_KEY_BYTES.
 *  \param[in] n_keys 0 ... 4096.
 *  \param[out] found Receives the index of the first key present, or -1 when
 *  none is; unchanged on failure.
 *  \retval SWA_OK; SWA_FAILED_PRECONDITION without a store; SWA_UNIMPLEMENTED
 *  when the store has no exists; SWA_INVALID_ARGUMENT for a NULL argument, a
 *  bad length (naming the key's index) or too many keys; else the error of the
 *  store for a key before the first one present (named by index): a failing
 *  store gives a status, never a shorter hit.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_cache_store_probe(swa_cache_t* cache, const uint8_t* const* keys,
                                           const size_t* key_lens, uint32_t n_keys,
                                           int32_t* found);

/** \brief Configuration of the built-in in-process memory store. */
typedef struct swa_store_memory_config {
  size_t struct_size;         /**< sizeof(swa_store_memory_config_t), set by init. */
  uint64_t budget_bytes;      /**< Most bytes held (keys + blobs); least recently used
                                   blobs are evicted to make room. Default 1 GiB. */
} swa_store_memory_config_t;

/** \brief Fill *config with the defaults listed on swa_store_memory_config_t.
 *  \param[out] config Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_store_memory_config_init(swa_store_memory_config_t* config);

/** \brief Statistics of a memory store. */
typedef struct swa_store_memory_stats {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_store_memory_stats_t). */
  uint64_t budget_bytes;      /**< The configured budget. */
  uint64_t bytes;             /**< Bytes held now (keys + blobs). */
  uint64_t entries;           /**< Blobs held now. */
  uint64_t puts;              /**< Successful puts. */
  uint64_t rejected_puts;     /**< Puts of a blob larger than the whole budget. */
  uint64_t hits;              /**< Gets that found their key. */
  uint64_t misses;            /**< Gets that did not. */
  uint64_t evictions;         /**< Blobs evicted to stay within the budget. */
  uint64_t evicted_bytes;     /**< Bytes those evictions freed. */
} swa_store_memory_stats_t;

/** \brief Create an in-process memory store: thread-safe, byte budget, LRU
 *  eviction (a get or put makes a key the most recently used), statistics.
 *  \param[in] config Borrowed for the call.
 *  \param[out] out Filled with the store's callback table (out->struct_size
 *  must be set, e.g. by swa_kv_store_init()); unchanged on failure. The caller
 *  owns out->user_data until it hands the table to swa_cache_set_store() or
 *  swa_store_tiered_create(), once (a second hand-over is refused); to drop
 *  it unused, call out->release(out->user_data). On a table already handed
 *  over, or already released, release does nothing (the owner keeps the
 *  store; nothing is freed twice).
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size or a zero budget.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_store_memory_create(const swa_store_memory_config_t* config,
                                             swa_kv_store_t* out);

/** \brief Read the statistics of a memory store.
 *  \param[in] store A table filled by swa_store_memory_create() whose user_data
 *  is still alive (owned by the caller or by a cache); a table whose store
 *  was released is refused (SWA_INVALID_ARGUMENT).
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size, or a table
 *  that is not a memory store.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_store_memory_stats(const swa_kv_store_t* store,
                                            swa_store_memory_stats_t* out);

/** \brief Configuration of the built-in directory store. */
typedef struct swa_store_directory_config {
  size_t struct_size;         /**< sizeof(swa_store_directory_config_t), set by init. */
  const char* path;           /**< Root directory; borrowed for the create call. Default NULL. */
  uint32_t create;            /**< 1: create the root (and parents) if missing. Default 1. */
  uint32_t sync;              /**< 1: fsync each blob and its directory before a put
                                   returns (durable across power loss). Default 1. */
} swa_store_directory_config_t;

/** \brief Fill *config with the defaults listed on swa_store_directory_config_t.
 *  \param[out] config Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_store_directory_config_init(swa_store_directory_config_t* config);

/** \brief Create a store that keeps one file per key under 256 sharded
 *  subdirectories of `config->path`. A put writes a temporary file, flushes it
 *  and renames it over the final name, so readers see the old blob or the new
 *  one, never a mix. A store opened on an existing directory finds every blob
 *  written there before (by this or another process).
 *  \param[in] config Borrowed for the call.
 *  \param[out] out Filled with the callback table (see swa_store_memory_create()
 *  for the ownership rules); unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size or an empty
 *  path; SWA_NOT_FOUND when the root is missing and create = 0;
 *  SWA_FAILED_PRECONDITION when the path is not a directory; SWA_PERMISSION_DENIED
 *  or another code when the directory cannot be created or written.
 *  \note Thread-safe; the store is safe to use from several threads and
 *  processes at once. */
SWA_API swa_status_t swa_store_directory_create(const swa_store_directory_config_t* config,
                                                swa_kv_store_t* out);

/** \brief Configuration of the built-in Redis store.
 *  \warning Experimental: may change before 1.0. */
typedef struct swa_store_redis_config {
  size_t struct_size;         /**< sizeof(swa_store_redis_config_t), set by init. */
  const char* host;           /**< Server host name or address. Default "127.0.0.1". */
  uint32_t port;              /**< TCP port, 1 ... 65535. Default 6379. */
  uint32_t db;                /**< Database number (SELECT). Default 0. */
  const char* password;       /**< AUTH password, or NULL for none. Default NULL. */
  uint32_t ttl_seconds;       /**< Expiry of each blob (SET ... EX); 0 = none. Default 0. */
  uint32_t timeout_ms;        /**< Connect and command timeout. Default 5000. */
  uint32_t max_connections;   /**< Idle connections kept for reuse. Default 8. */
  /* Appended after 0.2.0 (a struct_size without them means: the default
   * user, plain TCP). docs/store.md, "Redis TLS and ACL users". */
  /** ACL user: the connection authenticates with `AUTH username password`
   *  (Redis 6 and later); NULL = the default user (`AUTH password`). Needs
   *  `password`. Default NULL. */
  const char* username;
  /** 1: every connection speaks TLS (OpenSSL, TLS 1.2 or later); 0: plain
   *  TCP. Default 0. */
  uint32_t tls;
  /** 1: the server's certificate must chain to the CA (tls_ca_file /
   *  tls_ca_dir, else the system's default CA paths) and name the server
   *  (tls_server_name, else `host`); a failure is SWA_UNAUTHENTICATED naming the
   *  node and OpenSSL's reason. 0: no verification (encryption without
   *  authentication of the server; tests only). Default 1. */
  uint32_t tls_verify;
  const char* tls_ca_file;     /**< PEM file of trusted CA certificates, or NULL. Default NULL. */
  const char* tls_ca_dir;      /**< Folder of hashed CA certificates (c_rehash), or NULL. Default NULL. */
  /** PEM client certificate (chain) for servers that ask for one
   *  (tls-auth-clients), or NULL. Set with tls_key_file. Default NULL. */
  const char* tls_cert_file;
  const char* tls_key_file;    /**< PEM private key of tls_cert_file, or NULL. Default NULL. */
  /** Name sent as SNI and checked against the certificate (DNS name, or an IP
   *  address checked against its IP SANs); NULL = `host`. Default NULL. */
  const char* tls_server_name;
} swa_store_redis_config_t;

/** \brief Fill *config with the defaults listed on swa_store_redis_config_t.
 *  \param[out] config Written in full; NULL is ignored.
 *  \warning Experimental: may change before 1.0.
 *  \note Thread-safe. */
SWA_API void swa_store_redis_config_init(swa_store_redis_config_t* config);

/** \brief Create a store on a Redis server: one SET per blob (with the optional
 *  TTL), GET, EXISTS, DEL. Connects once to fail early; each call then borrows
 *  a pooled connection, so the store is thread-safe.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] config Borrowed for the call (strings are copied).
 *  \param[out] out Filled with the callback table (see swa_store_memory_create()
 *  for the ownership rules); unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size or field
 *  (a username without a password, a TLS file that cannot be loaded, a
 *  certificate without its key); SWA_UNAVAILABLE when the server cannot be
 *  reached or the TLS handshake fails (e.g. a plain-TCP port);
 *  SWA_UNAUTHENTICATED when AUTH fails (wrong user or password) or the
 *  server's certificate fails verification; SWA_UNIMPLEMENTED in a build
 *  without hiredis. Every message names the server.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_store_redis_create(const swa_store_redis_config_t* config,
                                            swa_kv_store_t* out);

/** \brief Configuration of the built-in Redis Cluster store.
 *  \warning Experimental: may change before 1.0. */
typedef struct swa_store_redis_cluster_config {
  size_t struct_size;            /**< sizeof(swa_store_redis_cluster_config_t), set by init. */
  const char* nodes;             /**< Seed nodes, "host:port,host:port" ("[v6]:port" for
                                      IPv6); one live seed is enough to load the slot map.
                                      Default "127.0.0.1:7000". */
  const char* password;          /**< AUTH password of every node, or NULL. Default NULL. */
  uint32_t ttl_seconds;          /**< Expiry of each blob (SET ... EX); 0 = none. Default 0. */
  uint32_t timeout_ms;           /**< Deadline of one store call, redirects and retries
                                      included (connect and each command get what is left).
                                      Default 5000. */
  uint32_t connections_per_node; /**< Idle connections kept per node. Default 4. */
  uint32_t read_from_replicas;   /**< 1: gets and exists read a replica of the slot (round
                                      robin; the master when that fails); 0: masters only.
                                      Default 0. */
  uint32_t max_attempts;         /**< Retry budget: tries per call (redirects, reconnects,
                                      CLUSTERDOWN/TRYAGAIN back-offs). Default 16. */
  /* Appended after 0.2.0 (a struct_size without them means: the default
   * user, plain TCP). docs/store.md, "Redis TLS and ACL users". */
  /** ACL user: the connection authenticates with `AUTH username password`
   *  (Redis 6 and later); NULL = the default user (`AUTH password`). Needs
   *  `password`. Default NULL. */
  const char* username;
  /** 1: every connection (to the seeds, the nodes of the slot map and the
   *  targets of MOVED/ASK) speaks TLS (OpenSSL, TLS 1.2 or later); 0: plain
   *  TCP. Default 0. */
  uint32_t tls;
  /** 1: the server's certificate must chain to the CA (tls_ca_file /
   *  tls_ca_dir, else the system's default CA paths) and name the server
   *  (tls_server_name, else each node's address); a failure is SWA_UNAUTHENTICATED naming the
   *  node and OpenSSL's reason. 0: no verification (encryption without
   *  authentication of the server; tests only). Default 1. */
  uint32_t tls_verify;
  const char* tls_ca_file;     /**< PEM file of trusted CA certificates, or NULL. Default NULL. */
  const char* tls_ca_dir;      /**< Folder of hashed CA certificates (c_rehash), or NULL. Default NULL. */
  /** PEM client certificate (chain) for servers that ask for one
   *  (tls-auth-clients), or NULL. Set with tls_key_file. Default NULL. */
  const char* tls_cert_file;
  const char* tls_key_file;    /**< PEM private key of tls_cert_file, or NULL. Default NULL. */
  /** Name sent as SNI and checked against the certificate (DNS name, or an IP
   *  address checked against its IP SANs); NULL = each node's address as the
   *  seeds and the slot map name it (one name for every node when set). Default NULL. */
  const char* tls_server_name;
} swa_store_redis_cluster_config_t;

/** \brief Fill *config with the defaults listed on swa_store_redis_cluster_config_t.
 *  \param[out] config Written in full; NULL is ignored.
 *  \warning Experimental: may change before 1.0.
 *  \note Thread-safe. */
SWA_API void swa_store_redis_cluster_config_init(swa_store_redis_cluster_config_t* config);

/** \brief Create a store on a Redis Cluster: one blob per key (SET with the
 *  optional TTL, GET, EXISTS, DEL), routed by the key's hash slot (CRC16 of the
 *  key or of its `{hash tag}`) over a slot map loaded with CLUSTER SLOTS. MOVED
 *  reloads the map and retries on the named node (backing off from the second
 *  MOVED of a call: nodes that disagree on the owner), ASK retries there after
 *  ASKING, a connection error reloads the map and retries, CLUSTERDOWN and
 *  TRYAGAIN back off and retry, all within `timeout_ms` and `max_attempts`.
 *  The seeds are only needed until the map is known.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] config Borrowed for the call (strings are copied).
 *  \param[out] out Filled with the callback table (see swa_store_memory_create()
 *  for the ownership rules); unchanged on failure.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size, a malformed
 *  `nodes` or a zero timeout or attempt budget; SWA_UNAVAILABLE when no seed
 *  answers CLUSTER SLOTS; SWA_UNAUTHENTICATED when AUTH fails or a node's
 *  certificate fails verification (as swa_store_redis_create()); SWA_UNIMPLEMENTED
 *  in a build without hiredis. Calls of the store return SWA_UNAVAILABLE or
 *  SWA_DEADLINE_EXCEEDED, naming the node and the reason, when the retry budget
 *  or the deadline runs out.
 *  \note Thread-safe; the store is safe to use from several threads (pooled
 *  connections per node). */
SWA_API swa_status_t swa_store_redis_cluster_create(const swa_store_redis_cluster_config_t* config,
                                                    swa_kv_store_t* out);

/** \brief Configuration of the tiered store.
 *  \warning Experimental: may change before 1.0. */
typedef struct swa_store_tiered_config {
  size_t struct_size;            /**< sizeof(swa_store_tiered_config_t), set by init. */
  const swa_kv_store_t* tiers;   /**< Store tables, fastest first (e.g. a memory store
                                      in front of a Redis Cluster store). Default NULL. */
  size_t n_tiers;                /**< Entries of `tiers`, 1 ... 16. Default 0. */
} swa_store_tiered_config_t;

/** \brief Fill *config with the defaults listed on swa_store_tiered_config_t.
 *  \param[out] config Written in full; NULL is ignored.
 *  \warning Experimental: may change before 1.0.
 *  \note Thread-safe. */
SWA_API void swa_store_tiered_config_init(swa_store_tiered_config_t* config);

/** \brief Create a store over an ordered list of stores. `get` asks each tier
 *  in order and copies a hit into every faster tier; a failing tier is skipped
 *  and its error returned only when no later tier has the key. `put` writes
 *  the slowest tier first and returns its error, with the tier named ("tier i
 *  of n"), touching no other tier: a put that returns an error is never
 *  visible (readers keep the previous blob or none). It then writes the faster
 *  tiers; one that fails is cleared of the key, or, when that fails too, never
 *  read for the key again until rewritten (docs/store.md, "Tiered"). `exists`
 *  is true when any tier has the key; `remove` removes from all, the slowest
 *  first, and changes nothing when that fails.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] config Borrowed for the call; the tables are copied.
 *  \param[out] out Filled with the callback table (see swa_store_memory_create()
 *  for the ownership rules); unchanged on failure.
 *  \retval SWA_OK: the tiered store owns every tier's user_data and calls each
 *  release once when it is released itself (built-in tables are used directly,
 *  without a C hop; their stats calls keep working on the caller's copy of the
 *  table while the tiered store lives).
 *  \retval SWA_INVALID_ARGUMENT for NULL, a bad struct_size, no tiers or more
 *  than 16, a table with a bad struct_size or neither put nor get, one
 *  user_data given twice, or a built-in table already owned by a cache or
 *  another tiered store, or already released (see swa_cache_set_store(); the
 *  message names the tier and its user_data); the caller then still owns
 *  every tier it owned before, and nothing is claimed.
 *  \note Thread-safe; the store is thread-safe when every tier is. */
SWA_API swa_status_t swa_store_tiered_create(const swa_store_tiered_config_t* config,
                                             swa_kv_store_t* out);

/** \brief Statistics of one tier of a tiered store.
 *  \warning Experimental: may change before 1.0. */
typedef struct swa_store_tier_stats {
  size_t struct_size;         /**< Set by the caller to sizeof(swa_store_tier_stats_t). */
  uint64_t hits;              /**< Gets this tier answered. */
  uint64_t misses;            /**< Gets this tier did not have the key for. */
  uint64_t errors;            /**< Calls of this tier that failed otherwise. */
  uint64_t bytes_read;        /**< Blob bytes of the hits. */
  uint64_t puts;              /**< Successful puts into this tier, promotions included. */
  uint64_t bytes_written;     /**< Blob bytes of those puts. */
  uint64_t promotions;        /**< Puts that copied a hit up from a slower tier. */
} swa_store_tier_stats_t;

/** \brief Read the statistics of tier `tier` of a tiered store.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] store A table filled by swa_store_tiered_create() whose user_data
 *  is still alive (owned by the caller or by a cache); a table whose store
 *  was released is refused (SWA_INVALID_ARGUMENT).
 *  \param[in] tier 0 (fastest) ... n_tiers - 1.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK; SWA_INVALID_ARGUMENT for NULL, a bad struct_size or a table
 *  that is not a tiered store; SWA_OUT_OF_RANGE for a tier past the last.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_store_tiered_stats(const swa_kv_store_t* store, uint32_t tier,
                                            swa_store_tier_stats_t* out);

/* ---- Projection ----------------------------------------------------------- */

/** \brief How swa_project() reads its weight matrix (values pinned).
 *  \warning Experimental: may change before 1.0. */
typedef enum swa_weight_layout {
  SWA_WEIGHT_OUT_IN = 0, /**< weight[q_dim + kv_dim, hidden_dim] row-major (torch.nn.Linear.weight). */
  SWA_WEIGHT_IN_OUT = 1  /**< weight[hidden_dim, q_dim + kv_dim] row-major. */
} swa_weight_layout_t;

/** \brief Arguments of swa_project(). Fill with swa_project_args_init().
 *  \warning Experimental: may change before 1.0.
 *
 *  The merged projection that produces a layer's query latents and SWA KV
 *  vectors from hidden states in one GEMM:
 *  out[T, q_dim + kv_dim] = hidden[T, hidden_dim] x weight, BF16 inputs, FP32
 *  accumulation. Columns [0, q_dim) of each output row are the query part and
 *  [q_dim, q_dim + kv_dim) the KV part. Tensors are dense row-major host memory
 *  on the CPU backend, device memory on the CUDA backend; all are borrowed for
 *  the call only. */
typedef struct swa_project_args {
  size_t struct_size;                /**< sizeof(swa_project_args_t), set by init. */
  const void* hidden;                /**< [n_tokens, hidden_dim] BF16 (uint16_t bits). */
  const void* weight;                /**< BF16, shape per weight_layout. */
  swa_weight_layout_t weight_layout; /**< Default SWA_WEIGHT_OUT_IN. */
  /** [n_tokens, q_dim + kv_dim] in out_dtype; fully written on success. Must
   *  not share memory with hidden or weight. */
  void* out;
  swa_dtype_t out_dtype;             /**< SWA_DTYPE_FP32 (default) or SWA_DTYPE_BF16 (round to nearest even). */
  int32_t n_tokens;                  /**< T >= 0 (int32, like every token count); 0 is a no-op. */
  uint32_t hidden_dim;               /**< K, >= 1. */
  uint32_t q_dim;                    /**< Query columns (may be 0). */
  uint32_t kv_dim;                   /**< KV columns (may be 0); q_dim + kv_dim >= 1. */
  void* stream;                      /**< cudaStream_t on the CUDA backend (work is enqueued, not waited for); ignored on the CPU. */
} swa_project_args_t;

/** \brief Fill *args with the defaults listed on swa_project_args_t (pointers NULL, sizes 0).
 *  \warning Experimental: may change before 1.0.
 *  \param[out] args Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_project_args_init(swa_project_args_t* args);

/** \brief Run the merged projection GEMM on the cache's backend.
 *
 *  CPU backend: a cache-blocked, multi-threaded GEMM that returns when done.
 *  CUDA backend: one cuBLASLt matmul enqueued on args->stream. It may be
 *  captured into a CUDA graph; a captured call uses no cuBLASLt workspace (its
 *  replays share no buffer with other projections, whatever stream they run
 *  on), so cuBLASLt may pick a slower algorithm than uncaptured.
 *  \warning Experimental: may change before 1.0.
 *  \param[in] cache Selects the backend (and CUDA device); its slots are not touched.
 *  \param[in] args The tensors and sizes.
 *  \retval SWA_OK on success.
 *  \retval SWA_INVALID_ARGUMENT for a NULL cache or args, a bad struct_size, NULL
 *  tensors (when n_tokens > 0), a negative n_tokens, hidden_dim = 0, q_dim + kv_dim = 0,
 *  an element count of hidden, weight or out above 2^60 (however large its
 *  factors: the message names the tensor and the values), unknown dtype or
 *  weight layout, an out that shares memory with hidden or weight (the
 *  message names both tensors and their byte ranges). Nothing is written then.
 *  \retval SWA_INTERNAL (or another code) when the CUDA runtime or cuBLASLt
 *  fails; the message carries its text.
 *  \see \ref md_docs_cuda_backend "docs/cuda_backend.md" (the cuBLASLt and CPU GEMM paths).
 *  \note Thread-safe; concurrent calls on one CUDA cache are serialised. */
SWA_API swa_status_t swa_project(swa_cache_t* cache, const swa_project_args_t* args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWACACHE_H_ */
