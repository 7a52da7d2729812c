"""Gemma-2 for the engine example (used by prefix_reuse.py): a tiny random model and
its adapter. Sliding layers in libswacache (NEOX RoPE, query_pre_attn_scalar scale and
the attention logit soft-cap applied inside swa_step); full layers in the engine (its
own RoPE, soft-capped attention over a plain KV list per request)."""

from __future__ import annotations

from typing import List

import torch

import swacache as sc
from common import SEED, W, batch_positions, history


def tiny_gemma2():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(SEED)
    cfg = Gemma2Config(vocab_size=96, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       query_pre_attn_scalar=24, sliding_window=W, attn_logit_softcapping=8.0,
                       final_logit_softcapping=30.0, max_position_embeddings=4096,
                       initializer_range=0.1, pad_token_id=0, eos_token_id=None,
                       bos_token_id=None)
    cfg._attn_implementation = "eager"
    return Gemma2ForCausalLM(cfg).eval().float()


def rope_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, H, D]; cos/sin [T, D] (transformers' cat(freqs, freqs) layout)."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def softcap_attention(q, k, v, start, scale, cap):
    """Causal soft-capped attention over all keys. q [n, Hq, D], k/v [S, Hkv, D]."""
    n, hq, _ = q.shape
    g = hq // k.shape[1]
    kk = k.repeat_interleave(g, dim=1).transpose(0, 1)
    vv = v.repeat_interleave(g, dim=1).transpose(0, 1)
    s = torch.matmul(q.transpose(0, 1), kk.transpose(1, 2)) * scale
    s = torch.tanh(s / cap) * cap
    qpos = torch.arange(start, start + n)[:, None]
    s = s.masked_fill((torch.arange(k.shape[0])[None, :] > qpos)[None], float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), vv).transpose(0, 1)


class Gemma2Adapter:
    """The adapter interface of engine.py's GptOssAdapter (layer_descs, forward, swa_id).
    With read_cached set (a replay), the full layers attend over the request's cached
    KV instead of writing what the replay recomputes."""

    name = "gemma-2"
    read_cached = False

    def __init__(self, model) -> None:
        self.model = model
        cfg = model.config
        self.sliding = [i for i, t in enumerate(cfg.layer_types) if t == "sliding_attention"]
        self.swa_id = {layer: j for j, layer in enumerate(self.sliding)}

    def layer_descs(self, kv_format: sc.Format) -> List[sc.Layer]:
        hf = sc.hf.layer_descs(self.model.config, kv_format=kv_format)
        assert hf.window == W and hf.model_layers == self.sliding
        return hf.layers

    def forward(self, eng, batch) -> torch.Tensor:
        m, cfg = self.model.model, self.model.config
        ids = torch.tensor([t for _, _, toks in batch for t in toks])
        pos = batch_positions(batch)
        T = len(ids)
        h = m.embed_tokens(ids[None])  # [1, T, hidden], scaled by sqrt(hidden)
        cos, sin = m.rotary_emb(h, pos[None])
        hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        for li, layer in enumerate(m.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)[0]
            q = attn.q_proj(x).view(T, hq, d)
            k = attn.k_proj(x).view(T, hkv, d)
            v = attn.v_proj(x).view(T, hkv, d)
            if li in self.swa_id:
                out = eng.plan.step(self.swa_id[li], q.contiguous(), k.contiguous(),
                                    v.contiguous())
            else:
                out = self._full_attention(batch, li, rope_half(q, cos[0], sin[0]),
                                           rope_half(k, cos[0], sin[0]), v, attn)
            a = attn.o_proj(out.reshape(1, T, hq * d))
            h = h + layer.post_attention_layernorm(a)
            h = h + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(h)))
        logits = self.model.lm_head(m.norm(h))[0]
        cap = cfg.final_logit_softcapping
        return torch.tanh(logits / cap) * cap if cap else logits

    def _full_attention(self, batch, li, q, k, v, attn):
        cap = self.model.config.attn_logit_softcapping
        outs, off = [], 0
        for r, start, toks in batch:
            n = len(toks)
            if self.read_cached:
                kk = r.state[f"k{li}"][:start + n]
                vv = r.state[f"v{li}"][:start + n]
            else:
                kk = history(r, f"k{li}", start, k[off:off + n])
                vv = history(r, f"v{li}", start, v[off:off + n])
            outs.append(softcap_attention(q[off:off + n], kk, vv, start, attn.scaling, cap))
            off += n
        return torch.cat(outs)
