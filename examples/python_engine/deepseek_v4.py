"""The DeepSeek-V4 adapter of the engine example (engine.py): a tiny random
DeepSeek-V4 (tiny_deepseek_v4) and DeepseekV4Adapter, which keeps every layer's sliding
window in libswacache and adds the CSA/HCA layers' compressed-key attention.
docs/engine-guide.md, "The DeepSeek-V4 adapter"."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

import torch

import swacache as sc
from common import SEED, W, batch_positions, history

if TYPE_CHECKING:
    from engine import Engine


def tiny_deepseek_v4(head_dim: int = 64, rotary_dims: int = 16):
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    torch.manual_seed(SEED)
    cfg = DeepseekV4Config(
        vocab_size=96, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=1, head_dim=head_dim, q_lora_rank=32,
        # 16 rotary dims by default: the trailing [48, 64) of each head
        partial_rotary_factor=rotary_dims / head_dim,
        num_experts_per_tok=2, n_routed_experts=4, n_shared_experts=1, hc_mult=2, o_groups=2,
        o_lora_rank=16, index_n_heads=16, index_head_dim=max(32, 2 * rotary_dims), index_topk=3,
        sliding_window=W,
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        layer_types=["sliding_attention", "compressed_sparse_attention",
                     "heavily_compressed_attention", "compressed_sparse_attention"],
        rope_parameters={"rope_type": "yarn", "factor": 16.0,
                         "original_max_position_embeddings": 65536, "beta_fast": 32.0,
                         "beta_slow": 1.0},
        max_position_embeddings=16 * 65536, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    cfg._attn_implementation = "eager"
    model = DeepseekV4ForCausalLM(cfg).eval().float()
    with torch.no_grad():  # the random init leaves these at zero; make them matter
        for name, p in model.named_parameters():
            if name.endswith("sinks"):
                p.normal_(0.0, 1.0)
            elif name.endswith("position_bias"):
                p.normal_(0.0, 0.5)
            elif name.endswith(".base") or name.endswith("hc_base"):
                p.normal_(0.0, 0.1)
        model.lm_head.weight.mul_(8.0)  # larger logit gaps: greedy choices are decisive
    return model


def rope_gptj_tail(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Interleaved (GPT-J) rotation of the trailing 2 * cos.shape[-1] dims of x [n, H, D]
    by per-row cos/sin [n, n_pairs]; pass -sin to rotate back."""
    rd = 2 * cos.shape[-1]
    nope, rope = x[..., :-rd], x[..., -rd:]
    a, b = rope[..., 0::2], rope[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    rot = torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)
    return torch.cat([nope, rot], dim=-1)


class DeepseekV4Adapter:
    """DeepSeek-V4: every layer's sliding window in libswacache (shared K=V vector, GPT-J
    RoPE on the trailing rotary slice with output de-rotation, sinks, and the step's LSE);
    CSA/HCA layers add the compressed-key attention, computed by the engine and merged
    through the LSE with swa_attention_merge."""

    name = "DeepSeek-V4"

    def __init__(self, model) -> None:
        self.model = model
        cfg = model.config
        self.n_layers = cfg.num_hidden_layers
        self.rd = cfg.qk_rope_head_dim

    def layer_descs(self, kv_format: sc.Format) -> List[sc.Layer]:
        # Every layer (sliding, CSA and HCA) keeps its window part in the cache;
        # the model's own config, through transformers' rules (docs/models.md).
        hf = sc.hf.layer_descs(self.model.config, kv_format=kv_format)
        assert hf.window == W and hf.model_layers == list(range(self.n_layers))
        return hf.layers

    def forward(self, eng: Engine, batch) -> torch.Tensor:
        model = self.model
        m, cfg = model.model, model.config
        ids = torch.tensor([t for _, _, toks in batch for t in toks])
        pos = batch_positions(batch)
        T = len(ids)
        hq, d = cfg.num_attention_heads, cfg.head_dim
        emb = m.embed_tokens(ids)[None]
        hs = emb.unsqueeze(2).expand(-1, -1, cfg.hc_mult, -1).contiguous()  # [1, T, hc, H]
        cos_c, sin_c = m.rotary_emb(emb, position_ids=pos[None], layer_type="compress")
        for li, layer in enumerate(m.layers):
            attn = layer.self_attn
            post, comb, collapsed = layer.attn_hc(hs)
            x = layer.input_layernorm(collapsed)  # [1, T, H]
            q_res = attn.q_a_norm(attn.q_a_proj(x))
            q = attn.q_b_norm(attn.q_b_proj(q_res).view(1, T, hq, d))[0]  # before RoPE
            kv = attn.kv_norm(attn.kv_proj(x)).view(T, 1, d)  # the shared K=V, before RoPE
            off = 0
            for r, start, toks in batch:  # K/V inputs, for the prefix cache
                history(r, f"swa_k{li}", start, kv[off:off + len(toks)])
                off += len(toks)
            sinks = attn.sinks.detach().contiguous()
            if attn.compressor is None:  # sliding-only: the step is the whole attention
                out = eng.plan.step(li, q.contiguous(), kv.contiguous(), sinks=sinks)
            else:
                o_w, l_w = eng.plan.step(li, q.contiguous(), kv.contiguous(), sinks=sinks,
                                         lse=True)
                o_c, l_c = self._compressed_attention(batch, li, attn, x[0], q_res[0], q,
                                                      cos_c[0], sin_c[0])
                out = eng.cache.attention_merge(o_w, l_w, o_c, l_c)
            grouped = out.reshape(1, T, cfg.o_groups, -1)
            a = attn.o_b_proj(attn.o_a_proj(grouped).flatten(2))
            hs = post.unsqueeze(-1) * a.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), hs)
            post, comb, collapsed = layer.ffn_hc(hs)
            mo = layer.mlp(layer.post_attention_layernorm(collapsed), input_ids=ids[None])
            hs = post.unsqueeze(-1) * mo.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), hs)
        return model.lm_head(m.norm(m.hc_head(hs)))[0]

    def _compressed_attention(self, batch, li, attn, x, q_res, q, cos, sin):
        """Attention of the new queries over the visible (and, for CSA, indexer-selected)
        compressed entries, without the sink: o_c [T, Hq, D] de-rotated, l_c [T, Hq].
        The compressor runs over the request's whole history of layer inputs (the engine's
        plain state): it emits an entry per complete window, so recomputing it gives the
        same entries as HF's incremental compressor state, and rewinds need no undo."""
        o_all, l_all, off = [], [], 0
        for r, start, toks in batch:
            n = len(toks)
            X = history(r, f"x{li}", start, x[off:off + n])
            QR = history(r, f"qr{li}", start, q_res[off:off + n])
            S = X.shape[0]
            ckv, bias = attn.compressor(X[None], QR[None], torch.arange(S)[None], None, li)
            ckv = ckv[0, 0]  # [E, D], rotated with the compress table at w * ratio
            qr = rope_gptj_tail(q[off:off + n], cos[off:off + n], sin[off:off + n])
            if ckv.shape[0] == 0:
                o_all.append(torch.zeros(n, q.shape[1], q.shape[2]))
                l_all.append(torch.full((n, q.shape[1]), float("-inf")))
                off += n
                continue
            s = torch.einsum("nhd,ed->nhe", qr, ckv) * attn.scaling
            if bias is not None:  # visibility (and CSA's top-k selection) of each row
                s = s + bias[0, 0, start:start + n][:, None, :]
            l_c = torch.logsumexp(s, dim=-1)  # -inf where no entry is visible
            p = torch.exp(s - l_c[..., None]).nan_to_num(0.0)
            o = torch.einsum("nhe,ed->nhd", p, ckv)
            o_all.append(rope_gptj_tail(o, cos[off:off + n], -sin[off:off + n]))  # de-rotate
            l_all.append(l_c)
            off += n
        return torch.cat(o_all).contiguous(), torch.cat(l_all).contiguous()

    def replay(self, eng: Engine, entry, start: int, h: int) -> None:
        cfg = self.model.config
        for li in range(self.n_layers):
            k = entry[f"swa_k{li}"][start:h]
            q = torch.zeros(h - start, cfg.num_attention_heads, cfg.head_dim)
            eng.plan.step(li, q, k.contiguous(),
                          sinks=self.model.model.layers[li].self_attn.sinks.detach().contiguous())


def tiny_deepseek_v4_512():
    """The same model at DeepSeek-V4's real head shape: head_dim 512 with the 64 rotary
    dims [448, 512), the one shape the FP8_DS_MLA record (584 B) holds."""
    return tiny_deepseek_v4(head_dim=512, rotary_dims=64)
