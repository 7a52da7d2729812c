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
 *    appended; a struct_size the library does not know is an error.
 *  - Handles are opaque; create/destroy come in pairs; destroy accepts NULL.
 *  - Device streams are `void*` (a cudaStream_t on the CUDA backend).
 */
#ifndef SWACACHE_H_
#define SWACACHE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \file swacache.h
 *  \brief The public C API of libswacache. */

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
#define SWA_VERSION_MINOR 1
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
 *  \note Thread-safe: each thread sees only its own message. */
SWA_API const char* swa_last_error(void);

/* ---- Enumerations ------------------------------------------------------- */

/** \brief Storage format of the KV vectors in a layer's ring (SPEC section 3). */
typedef enum swa_format {
  SWA_FORMAT_MXFP8 = 0, /**< D E4M3 codes then D/32 E8M0 scales: D + D/32 bytes. */
  SWA_FORMAT_BF16 = 1,  /**< 2D bytes. */
  SWA_FORMAT_FP32 = 2   /**< 4D bytes (debug and reference). */
} swa_format_t;

/** \brief Element type of tensors exchanged with the library. */
typedef enum swa_dtype {
  SWA_DTYPE_FP32 = 0, /**< IEEE binary32. */
  SWA_DTYPE_BF16 = 1  /**< bfloat16, stored as uint16_t. */
} swa_dtype_t;

/** \brief How an MXFP8 block's E8M0 scale is chosen (SPEC section 4). */
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
  uint32_t compress_ratio;    /**< c of the compression state; 0 = none. Default 0. */
  uint32_t compress_entry_bytes; /**< Bytes of one compression entry. Default 0. */
  float rope_theta;           /**< RoPE base (informational). Default 10000. */
  uint32_t rope_dims;         /**< Rotary dims (informational). Default 0. */
  uint32_t has_sinks;         /**< 1: the layer has per-head attention sinks. Default 0. */
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
  uint32_t max_slots;         /**< Number of state slots in the pool. Default 64. */
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
} swa_config_t;

/** \brief Fill *config with the defaults listed on swa_config_t (no layers).
 *  \param[out] config Written in full; NULL is ignored.
 *  \note Thread-safe. */
SWA_API void swa_config_init(swa_config_t* config);

/* ---- Layout ------------------------------------------------------------- */

/** \brief Whole-slot layout of a cache (SPEC section 3). */
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
  uint32_t compress_len;      /**< Compression ring entries (c + N), 0 = none. */
  uint32_t compress_entry_bytes; /**< Bytes of one compression entry. */
  uint64_t compress_offset;   /**< Offset of the compression region (0 when none). */
  uint64_t compress_bytes;    /**< compress_len * entry bytes rounded up to the alignment. */
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
 *  \retval SWA_UNIMPLEMENTED for a backend this build does not have.
 *  \note Thread-safe. The caller owns the cache and frees it with swa_cache_destroy(). */
SWA_API swa_status_t swa_cache_create(const swa_config_t* config, swa_cache_t** out);

/** \brief Destroy a cache and free its pool (unless caller-provided). NULL is a no-op.
 *  \note Not thread-safe with any other call on the same cache. */
SWA_API void swa_cache_destroy(swa_cache_t* cache);

/** \brief Read the whole-slot layout of a cache.
 *  \param[in] cache The cache.
 *  \param[out] out out->struct_size must be set by the caller.
 *  \retval SWA_OK, or SWA_INVALID_ARGUMENT for NULL or a bad struct_size.
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
 *  \note Thread-safe. Ring row `r = slot * R + (p mod R)` lives at
 *  `data + (r / R) * slot_bytes + (r mod R) * bytes_per_token`. */
SWA_API swa_status_t swa_cache_layer_view(const swa_cache_t* cache, uint32_t layer,
                                          swa_tensor_view_t* out);

/* ---- Slots -------------------------------------------------------------- */

/** \brief Per-slot state (SPEC sections 2 and 8). */
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
 *  SWA_FAILED_PRECONDITION for a slot that is not allocated (double free).
 *  \note Thread-safe. The caller must not use the slot in a step in flight. */
SWA_API swa_status_t swa_slot_free(swa_cache_t* cache, uint32_t slot);

/** \brief Reset an allocated slot for recompute: written_end = valid_start = 0.
 *  The bytes are left as they are (no index ever names an unwritten position).
 *  \param[in] cache The cache.
 *  \param[in] slot The slot id to reset.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE; SWA_FAILED_PRECONDITION when not allocated.
 *  \note Thread-safe. */
SWA_API swa_status_t swa_slot_reset(swa_cache_t* cache, uint32_t slot);

/** \brief Fork a sequence: copy every byte and the metadata of slot `src` into
 *  slot `dst`. Both must be allocated; src == dst is a no-op.
 *  \param[in] cache The cache.
 *  \param[in] src Slot to copy from.
 *  \param[in] dst Slot to overwrite.
 *  \retval SWA_OK; SWA_OUT_OF_RANGE; SWA_FAILED_PRECONDITION when either slot is
 *  not allocated.
 *  \note Thread-safe with respect to the slot table; the caller must not run a
 *  step on either slot at the same time. */
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWACACHE_H_ */
