#include "backend/cuda/step_params.h"

namespace swa::cuda {

kernels::EncodeParams EncodeParamsOf(const StepLayer& L, const StepTensors& x, int32_t n_tokens) {
  kernels::EncodeParams enc;
  enc.k_new = x.k_new;
  enc.v_new = L.shared_kv ? nullptr : x.v_new;
  enc.src_dtype = x.kv_dtype;
  enc.n_tokens = n_tokens;
  enc.kv_heads = L.kv_heads;
  enc.head_dim = L.head_dim;
  enc.format = L.format;
  enc.ceil = L.scale_mode == ScaleMode::kCeil;
  enc.vec_bytes = L.vec_bytes;
  enc.bytes_per_token = L.ring.bytes_per_token;
  enc.ring = L.ring;
  return enc;
}

kernels::AttentionParams AttentionParamsOf(const StepLayer& L, const StepTensors& x,
                                           float scale) {
  kernels::AttentionParams at;
  at.q = x.q;
  at.q_dtype = x.q_dtype;
  at.out = x.out;
  at.out_dtype = x.out_dtype;
  at.sinks = x.sinks;
  at.scale = scale;
  at.q_heads = L.q_heads;
  at.kv_heads = L.kv_heads;
  at.head_dim = L.head_dim;
  at.shared_kv = L.shared_kv;
  at.format = L.format;
  at.vec_bytes = L.vec_bytes;
  at.bytes_per_token = L.ring.bytes_per_token;
  at.window = L.window;
  at.use_mma = UseMma(L, x);
  at.softcap = L.softcap;
  at.lse = x.lse;
  return at;
}

kernels::RopeParams RopeParamsOf(const RopeTable& t, const kernels::RopeCs* d_cos_sin) {
  kernels::RopeParams r;
  if (!t.on()) return r;
  r.style = t.style;
  r.first_dim = static_cast<int32_t>(t.first_dim);
  r.dims = static_cast<int32_t>(t.dims);
  r.attention_factor = t.attention_factor;
  r.derotate_output = t.derotate_output;
  r.cos_sin = d_cos_sin;
  return r;
}

}  // namespace swa::cuda
