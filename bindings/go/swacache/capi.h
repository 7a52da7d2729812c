/* C side of the Go binding, included by the preamble of every cgo file of
 * the package: static inline wrappers, one per fallible call. Each returns the
 * status together with a malloc'd copy of swa_last_error(), taken in the same
 * C call: the message is thread-local, and a goroutine may move to another OS
 * thread between two cgo calls. Wrappers take pointers as plain arguments so
 * that no Go memory handed to C holds a Go pointer (the cgo pointer rules);
 * C keeps none of them after the call. */
#ifndef SWACACHE_GO_CAPI_H_
#define SWACACHE_GO_CAPI_H_
#include <stdlib.h>
#include <string.h>
#include "swacache.h"

typedef struct swago_ret {
  int status;
  char* msg;
} swago_ret;

static inline swago_ret swago_r(swa_status_t st) {
  swago_ret r;
  r.status = (int)st;
  r.msg = NULL;
  if (st != SWA_OK) {
    const char* m = swa_last_error();
    r.msg = strdup(m ? m : "");
  }
  return r;
}

// Stands in for the data pointer of an empty (but present) Go slice.
static uint64_t swago_empty[8];
static inline void* swago_empty_ptr(void) { return swago_empty; }

// ---- Cache and layout ----
static inline swago_ret swago_layout_compute(const swa_config_t* c, swa_layout_t* out) {
  return swago_r(swa_layout_compute(c, out));
}
static inline swago_ret swago_cache_create(const swa_config_t* c, swa_cache_t** out) {
  return swago_r(swa_cache_create(c, out));
}
static inline swago_ret swago_cache_layout(const swa_cache_t* c, swa_layout_t* out) {
  return swago_r(swa_cache_layout(c, out));
}
static inline swago_ret swago_cache_layer_layout(const swa_cache_t* c, uint32_t l, swa_layer_layout_t* out) {
  return swago_r(swa_cache_layer_layout(c, l, out));
}
static inline swago_ret swago_cache_layer_view(const swa_cache_t* c, uint32_t l, swa_tensor_view_t* out) {
  return swago_r(swa_cache_layer_view(c, l, out));
}
static inline swago_ret swago_cache_stats(const swa_cache_t* c, swa_cache_stats_t* out) {
  return swago_r(swa_cache_stats(c, out));
}

// ---- Slots ----
static inline swago_ret swago_slot_alloc(swa_cache_t* c, uint32_t* s) { return swago_r(swa_slot_alloc(c, s)); }
static inline swago_ret swago_slot_free(swa_cache_t* c, uint32_t s) { return swago_r(swa_slot_free(c, s)); }
static inline swago_ret swago_slot_reset(swa_cache_t* c, uint32_t s) { return swago_r(swa_slot_reset(c, s)); }
static inline swago_ret swago_slot_copy(swa_cache_t* c, uint32_t a, uint32_t b) {
  return swago_r(swa_slot_copy(c, a, b));
}
static inline swago_ret swago_slot_info(const swa_cache_t* c, uint32_t s, swa_slot_info_t* out) {
  return swago_r(swa_slot_info(c, s, out));
}
static inline swago_ret swago_slot_set_valid_start(swa_cache_t* c, uint32_t s, int32_t v) {
  return swago_r(swa_slot_set_valid_start(c, s, v));
}
static inline swago_ret swago_slot_begin_replay(swa_cache_t* c, uint32_t s, int32_t h, int32_t* a, int32_t* b) {
  return swago_r(swa_slot_begin_replay(c, s, h, a, b));
}

// ---- Plans ----
static inline swago_ret swago_plan_create(swa_cache_t* c, uint32_t index_pad, uint32_t materialize,
                                   swa_plan_t** out) {
  swa_plan_options_t o;
  swa_plan_options_init(&o);
  o.index_pad = (swa_index_pad_t)index_pad;
  o.materialize_index = materialize;
  return swago_r(swa_plan_create_with_options(c, &o, out));
}
static inline swago_ret swago_plan_build(swa_plan_t* p, const swa_seq_t* seqs, uint32_t n) {
  return swago_r(swa_plan_build(p, seqs, n));
}
static inline swago_ret swago_plan_cancel(swa_plan_t* p) { return swago_r(swa_plan_cancel(p)); }
static inline swago_ret swago_plan_info(const swa_plan_t* p, swa_plan_info_t* out) {
  return swago_r(swa_plan_info(p, out));
}
static inline swago_ret swago_plan_decode_index(const swa_plan_t* p, int32_t* ol, int32_t* idx) {
  return swago_r(swa_plan_decode_index(p, ol, idx));
}
static inline swago_ret swago_plan_load_segments(const swa_plan_t* p, swa_segment_t* out, size_t cap, size_t* n) {
  return swago_r(swa_plan_load_segments(p, out, cap, n));
}
static inline swago_ret swago_plan_pivots(const swa_plan_t* p, int32_t* out) {
  return swago_r(swa_plan_pivots(p, out));
}
static inline swago_ret swago_plan_store_rows(const swa_plan_t* p, int32_t* out) {
  return swago_r(swa_plan_store_rows(p, out));
}
static inline swago_ret swago_plan_store_segments(const swa_plan_t* p, swa_segment_t* out, size_t cap, size_t* n) {
  return swago_r(swa_plan_store_segments(p, out, cap, n));
}
static inline swago_ret swago_plan_seq_offsets(const swa_plan_t* p, int32_t* cu, int32_t* qs, int32_t* vs) {
  return swago_r(swa_plan_seq_offsets(p, cu, qs, vs));
}

// ---- Step ----
static inline swago_ret swago_step(swa_cache_t* c, swa_plan_t* p, uint32_t layer,
                            const void* q, uint32_t q_dtype, const void* k, const void* v,
                            uint32_t kv_dtype, void* out, uint32_t out_dtype,
                            const float* sinks, float scale, float* lse,
                            const int32_t* positions) {
  swa_step_args_t a;
  swa_step_args_init(&a);
  a.layer = layer;
  a.q = q;
  a.q_dtype = (swa_dtype_t)q_dtype;
  a.k_new = k;
  a.v_new = v;
  a.kv_dtype = (swa_dtype_t)kv_dtype;
  a.out = out;
  a.out_dtype = (swa_dtype_t)out_dtype;
  a.sinks = sinks;
  a.softmax_scale = scale;
  a.lse = lse;
  a.positions = positions;
  return swago_r(swa_step(c, p, &a));
}

// ---- Store ----
static inline swago_ret swago_set_store(swa_cache_t* c, const swa_kv_store_t* s) {
  return swago_r(swa_cache_set_store(c, s));
}
static inline swago_ret swago_slot_save(swa_cache_t* c, uint32_t s, const uint8_t* k, size_t n) {
  return swago_r(swa_slot_save(c, s, k, n));
}
static inline swago_ret swago_slot_restore(swa_cache_t* c, uint32_t s, const uint8_t* k, size_t n) {
  return swago_r(swa_slot_restore(c, s, k, n));
}
static inline swago_ret swago_store_exists(swa_cache_t* c, const uint8_t* k, size_t n, uint32_t* e) {
  return swago_r(swa_cache_store_exists(c, k, n, e));
}
static inline swago_ret swago_store_remove(swa_cache_t* c, const uint8_t* k, size_t n) {
  return swago_r(swa_cache_store_remove(c, k, n));
}
// Prefix reuse (issue 32): checkpoints, the probe, the exact replay span.
static inline swago_ret swago_slot_save_at(swa_cache_t* c, uint32_t s, int32_t pos,
                                           const uint8_t* k, size_t n) {
  return swago_r(swa_slot_save_at(c, s, pos, k, n));
}
static inline swago_ret swago_slot_checkpoint_range(swa_cache_t* c, uint32_t s, int32_t* lo,
                                                    int32_t* hi) {
  return swago_r(swa_slot_checkpoint_range(c, s, lo, hi));
}
// keys: n_keys pointers into C memory; lens: their lengths (C memory too).
static inline swago_ret swago_store_probe(swa_cache_t* c, const uint8_t* const* keys,
                                          const size_t* lens, uint32_t n, int32_t* found) {
  return swago_r(swa_cache_store_probe(c, keys, lens, n, found));
}
static inline swago_ret swago_slot_begin_replay_exact(swa_cache_t* c, uint32_t s, int32_t h,
                                                      uint32_t layers, int32_t last, int32_t* a,
                                                      int32_t* b) {
  return swago_r(swa_slot_begin_replay_exact(c, s, h, layers, last, a, b));
}

// ---- Codec ----
static inline swago_ret swago_format_vector_bytes(uint32_t f, uint32_t dim, uint32_t* out) {
  return swago_r(swa_format_vector_bytes((swa_format_t)f, dim, out));
}
static inline swago_ret swago_attention_cpu_path(uint32_t dt, const char** name) {
  return swago_r(swa_attention_cpu_path((swa_dtype_t)dt, name));
}
static inline swago_ret swago_codec_encode(uint32_t f, uint32_t mode, const void* src, uint32_t dt,
                                    size_t n, uint32_t dim, void* dst, uint64_t* nf) {
  return swago_r(swa_codec_encode((swa_format_t)f, (swa_scale_mode_t)mode, src, (swa_dtype_t)dt,
                                  n, dim, dst, nf));
}
static inline swago_ret swago_codec_decode(uint32_t f, const void* src, size_t n, uint32_t dim,
                                    void* dst, uint32_t dt, uint64_t* nf) {
  return swago_r(swa_codec_decode((swa_format_t)f, src, n, dim, dst, (swa_dtype_t)dt, nf));
}

// ---- Projection ----
static inline swago_ret swago_project(swa_cache_t* c, const void* hidden, const void* weight,
                                      uint32_t weight_layout, void* out, uint32_t out_dtype,
                                      int32_t n_tokens, uint32_t hidden_dim, uint32_t q_dim,
                                      uint32_t kv_dim) {
  swa_project_args_t a;
  swa_project_args_init(&a);
  a.hidden = hidden;
  a.weight = weight;
  a.weight_layout = (swa_weight_layout_t)weight_layout;
  a.out = out;
  a.out_dtype = (swa_dtype_t)out_dtype;
  a.n_tokens = n_tokens;
  a.hidden_dim = hidden_dim;
  a.q_dim = q_dim;
  a.kv_dim = kv_dim;
  return swago_r(swa_project(c, &a));
}

// ---- MXFP8 shorthands ----
static inline swago_ret swago_mxfp8_encode(const void* src, uint32_t dt, size_t n, uint32_t dim,
                                           uint32_t mode, void* dst, uint64_t* nf) {
  return swago_r(swa_mxfp8_encode(src, (swa_dtype_t)dt, n, dim, (swa_scale_mode_t)mode,
                                  (uint8_t*)dst, nf));
}
static inline swago_ret swago_mxfp8_decode(const void* src, size_t n, uint32_t dim, void* dst,
                                           uint32_t dt, uint64_t* nf) {
  return swago_r(swa_mxfp8_decode((const uint8_t*)src, n, dim, dst, (swa_dtype_t)dt, nf));
}

// ---- Merge ----
static inline swago_ret swago_attention_merge(swa_cache_t* c, int64_t rows, uint32_t head_dim,
                                              uint32_t dtype, const void* out_a,
                                              const float* lse_a, const void* out_b,
                                              const float* lse_b, void* out, float* lse) {
  swa_merge_args_t a;
  swa_merge_args_init(&a);
  a.rows = rows;
  a.head_dim = head_dim;
  a.dtype = (swa_dtype_t)dtype;
  a.out_a = out_a;
  a.lse_a = lse_a;
  a.out_b = out_b;
  a.lse_b = lse_b;
  a.out = out;
  a.lse = lse;
  return swago_r(swa_attention_merge(c, &a));
}

// ---- RoPE as a service ----
static inline swago_ret swago_rope_table(const swa_layer_desc_t* l, float* inv_freq,
                                         uint32_t capacity, swa_rope_info_t* info) {
  info->struct_size = sizeof *info;
  return swago_r(swa_rope_table(l, inv_freq, capacity, info));
}
static inline swago_ret swago_rope_apply(const swa_layer_desc_t* l, void* x, uint32_t dtype,
                                         uint32_t heads, int64_t tokens,
                                         const int32_t* positions, uint32_t inverse) {
  swa_rope_args_t a;
  swa_rope_args_init(&a);
  a.layer = l;
  a.x = x;
  a.dtype = (swa_dtype_t)dtype;
  a.heads = heads;
  a.tokens = tokens;
  a.positions = positions;
  a.inverse = inverse;
  return swago_r(swa_rope_apply(&a));
}


// ---- Compressor (issue 31) ----
static inline swago_ret swago_plan_compress_windows(const swa_plan_t* p, uint32_t layer,
                                                    swa_compress_window_t* out, size_t cap,
                                                    size_t* count) {
  return swago_r(swa_plan_compress_windows(p, layer, out, cap, count));
}
static inline swago_ret swago_plan_compress_store_segments(const swa_plan_t* p, uint32_t layer,
                                                           swa_segment_t* out, size_t cap,
                                                           size_t* count) {
  return swago_r(swa_plan_compress_store_segments(p, layer, out, cap, count));
}
static inline swago_ret swago_cache_compress_view(const swa_cache_t* c, uint32_t layer,
                                                  uint32_t compressor, swa_tensor_view_t* out) {
  return swago_r(swa_cache_compress_view(c, layer, compressor, out));
}
static inline swago_ret swago_cache_set_save_compression(swa_cache_t* c, uint32_t enable) {
  return swago_r(swa_cache_set_save_compression(c, enable));
}
static inline swago_ret swago_compress_step(swa_cache_t* c, swa_plan_t* p, uint32_t layer,
                                            uint32_t compressor, const void* kv, const void* gate,
                                            uint32_t dtype, uint32_t row_width, int64_t rows,
                                            const float* bias, const float* weight, float eps,
                                            void* out, uint32_t out_dtype, uint64_t out_rows) {
  swa_compress_args_t a;
  swa_compress_args_init(&a);
  a.layer = layer;
  a.compressor = compressor;
  a.kv = kv;
  a.gate = gate;
  a.dtype = (swa_dtype_t)dtype;
  a.row_width = row_width;
  a.rows = rows;
  a.position_bias = bias;
  a.norm_weight = weight;
  a.norm_eps = eps;
  a.out = out;
  a.out_dtype = (swa_dtype_t)out_dtype;
  a.out_rows = out_rows;
  return swago_r(swa_compress_step(c, p, &a));
}

#endif  /* SWACACHE_GO_CAPI_H_ */
