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
    CSA/HCA layers add the compressed-key attention, merged through the LSE with
    swa_attention_merge. The compressors' state is in libswacache too: each compressed
    layer declares its typed compressor (and CSA its Lightning Indexer's), and every step
    hands the library the new tokens' projected kv and gate rows (swa_compress_step),
    which keeps the open windows' rows in the slot's compressor ring, rewinds them with
    the window ring, and returns the entries of the windows that close. The entries are
    the engine's long-range KV: one list per request and compressor, overwritten from
    entry q_start // c on (a window that a rejected draft closed closes again)."""

    name = "DeepSeek-V4"

    def __init__(self, model) -> None:
        self.model = model
        cfg = model.config
        self.n_layers = cfg.num_hidden_layers
        self.rd = cfg.qk_rope_head_dim
        self.rates = {li: layer.self_attn.compressor.compress_rate
                      for li, layer in enumerate(model.model.layers)
                      if layer.self_attn.compressor is not None}
        self.library_persists = False  # set by setup()
        self._saved_rings: dict = {}  # rid -> compressor rows, without library persistence

    def layer_descs(self, kv_format: sc.Format) -> List[sc.Layer]:
        # Every layer (sliding, CSA and HCA) keeps its window part in the cache, and the
        # CSA/HCA layers their compressors; the model's own config, through
        # transformers' rules (docs/models.md).
        hf = sc.hf.layer_descs(self.model.config, kv_format=kv_format, compressors=True)
        assert hf.window == W and hf.model_layers == list(range(self.n_layers))
        return hf.layers

    def setup(self, cache: sc.Cache) -> None:
        """Saves carry the compressor rings (swa_cache_set_save_compression): a preempted
        request's compressor state leaves with its window ring and comes back with it."""
        try:
            cache.set_save_compression(True)
            self.library_persists = True
        except sc.UnimplementedError:
            # A library without the blob's compression section: the adapter keeps the
            # slot's compressor rows itself across the preemption (preempt / resume).
            self.library_persists = False

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
            for r, start, toks in batch:  # K/V (and compressor) inputs, for the prefix cache
                history(r, f"swa_k{li}", start, kv[off:off + len(toks)])
                if attn.compressor is not None:
                    history(r, f"x{li}", start, x[0, off:off + len(toks)])
                off += len(toks)
            sinks = attn.sinks.detach().contiguous()
            if attn.compressor is None:  # sliding-only: the step is the whole attention
                out = eng.plan.step(li, q.contiguous(), kv.contiguous(), sinks=sinks)
            else:
                o_w, l_w = eng.plan.step(li, q.contiguous(), kv.contiguous(), sinks=sinks,
                                         lse=True)
                self._compress(eng, batch, li, attn.compressor, x[0])
                o_c, l_c = self._compressed_attention(batch, li, attn, x[0], q_res[0], q, pos,
                                                      cos_c[0], sin_c[0])
                out = eng.cache.attention_merge(o_w, l_w, o_c, l_c)
            grouped = out.reshape(1, T, cfg.o_groups, -1)
            a = attn.o_b_proj(attn.o_a_proj(grouped).flatten(2))
            hs = post.unsqueeze(-1) * a.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), hs)
            post, comb, collapsed = layer.ffn_hc(hs)
            mo = layer.mlp(layer.post_attention_layernorm(collapsed), input_ids=ids[None])
            hs = post.unsqueeze(-1) * mo.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), hs)
        return model.lm_head(m.norm(m.hc_head(hs)))[0]

    @staticmethod
    def _compressors(comp):
        """(compressor index, module) of a layer's compressors: the CSA/HCA compressor,
        and the CSA layer's Lightning Indexer (the same structure, its own widths)."""
        mods = [(0, comp)]
        if getattr(comp, "indexer", None) is not None:
            mods.append((1, comp.indexer))
        return mods

    def _compress(self, eng: Engine, batch, li: int, comp, x: torch.Tensor,
                  record: bool = True) -> None:
        """swa_compress_step of the layer's compressors over the step's new tokens: the
        library stores their kv/gate rows in the slot's compressor ring and returns the
        entries of the windows that close (written into the request's entry lists at
        their absolute index w, dropping entries >= q_start // c, which rejected drafts
        may have closed). record=False (replay): only the ring is wanted."""
        c = self.rates[li]
        wins = eng.plan.compress_windows(li)
        for k, mod in self._compressors(comp):
            rows_kv = mod.kv_proj(x).contiguous()  # [T, S]: S = head_dim (HCA), 2 x (CSA)
            rows_gate = mod.gate_proj(x).contiguous()
            ent = eng.plan.compress_step(li, rows_kv, rows_gate,
                                         mod.position_bias.detach().contiguous(),
                                         mod.kv_norm.weight.detach().contiguous(),
                                         compressor=k, norm_eps=mod.kv_norm.variance_epsilon)
            if not record:
                continue
            name = f"ce{li}" if k == 0 else f"ie{li}"
            for i, (r, start, _toks) in enumerate(batch):
                rows = [j for j in range(len(wins)) if int(wins[j]["seq"]) == i]
                keep = start // c
                assert all(int(wins[j]["entry"]) == keep + n for n, j in enumerate(rows))
                old = r.state.get(name, ent.new_zeros((0, ent.shape[1])))
                r.state[name] = torch.cat([old[:keep], ent[rows]])

    def _compressed_attention(self, batch, li, attn, x, q_res, q, pos, cos, sin):
        """Attention of the new queries over their visible (and, for CSA, indexer-selected)
        compressed entries, without the sink: o_c [T, Hq, D] de-rotated, l_c [T, Hq].
        Query t sees entry w when its window closed at or before t (w < (t + 1) // c);
        a CSA query also needs the Lightning Indexer to pick it (top-k of its scores over
        the indexer's entries, which the library computed alongside)."""
        comp, c = attn.compressor, self.rates[li]
        o_all, l_all, off = [], [], 0
        for r, start, toks in batch:
            n = len(toks)
            ckv = r.state[f"ce{li}"]  # [E, D], rotated with the compress table at w * c
            E = ckv.shape[0]
            qr = rope_gptj_tail(q[off:off + n], cos[off:off + n], sin[off:off + n])
            if E == 0:
                o_all.append(torch.zeros(n, q.shape[1], q.shape[2]))
                l_all.append(torch.full((n, q.shape[1]), float("-inf")))
                off += n
                continue
            qpos = pos[off:off + n]
            visible = torch.arange(E)[None, :] < ((qpos + 1) // c)[:, None]  # [n, E]
            if getattr(comp, "indexer", None) is not None:
                visible &= self._indexer_pick(comp.indexer, r.state[f"ie{li}"],
                                              x[off:off + n], q_res[off:off + n], qpos, c)
            s = torch.einsum("nhd,ed->nhe", qr, ckv) * attn.scaling
            s = s.masked_fill(~visible[:, None, :], float("-inf"))
            l_c = torch.logsumexp(s, dim=-1)  # -inf where no entry is visible
            p = torch.exp(s - l_c[..., None]).nan_to_num(0.0)
            o = torch.einsum("nhe,ed->nhd", p, ckv)
            o_all.append(rope_gptj_tail(o, cos[off:off + n], -sin[off:off + n]))  # de-rotate
            l_all.append(l_c)
            off += n
        return torch.cat(o_all).contiguous(), torch.cat(l_all).contiguous()

    @staticmethod
    def _indexer_pick(idx, ie, x, q_res, qpos, c) -> torch.Tensor:
        """The Lightning Indexer's choice [n, E] for n queries at qpos over the indexer
        entries ie [E, index_head_dim]: transformers' DeepseekV4Indexer scoring (its
        queries rotated at their positions, ReLU scores weighted per head), causal
        masking and top-k, with its -1 picks dropped."""
        from transformers.models.deepseek_v4.modeling_deepseek_v4 import apply_rotary_pos_emb

        n, E = x.shape[0], ie.shape[0]
        cos_q, sin_q = idx.rotary_emb(x[None], position_ids=qpos[None], layer_type="compress")
        qi = idx.q_b_proj(q_res[None]).view(1, n, -1, idx.head_dim).transpose(1, 2)
        qi = apply_rotary_pos_emb(qi, cos_q, sin_q).transpose(1, 2)
        scores = idx.scorer(qi, ie[None], x[None])[0]  # [n, E]
        threshold = (qpos + 1) // c
        future = torch.arange(E)[None, :] >= threshold[:, None]
        top = scores.masked_fill(future, float("-inf")).topk(min(idx.index_topk, E), dim=-1)
        picked = torch.zeros(n, E + 1, dtype=torch.bool)  # column E takes the -1 picks
        ok = top.indices < threshold[:, None]
        picked.scatter_(1, torch.where(ok, top.indices, E), True)
        return picked[:, :E]

    # ---- preemption without the library's compression section (older library)
    def preempt(self, eng: Engine, r) -> None:
        if self.library_persists:
            return
        self._saved_rings[r.rid] = [eng.cache.compress_ring(li, k)[int(r.slot)].copy()
                             for li in self.rates
                             for k, _ in self._compressors(self.model.model.layers[li]
                                                           .self_attn.compressor)]

    def resume(self, eng: Engine, r) -> None:
        if self.library_persists:
            return
        rings = iter(self._saved_rings.pop(r.rid))
        for li in self.rates:
            for k, _ in self._compressors(self.model.model.layers[li].self_attn.compressor):
                eng.cache.compress_ring(li, k)[int(r.slot)] = next(rings)

    def replay(self, eng: Engine, entry, start: int, h: int) -> None:
        """Bounded replay after a prefix-cache hit: positions start ... h - 1 go through
        every window ring and compressor ring again (the compressed entries of the first h
        tokens come from the prefix cache; the replay's own entries are not kept)."""
        cfg = self.model.config
        for li in range(self.n_layers):
            k = entry[f"swa_k{li}"][start:h]
            q = torch.zeros(h - start, cfg.num_attention_heads, cfg.head_dim)
            attn = self.model.model.layers[li].self_attn
            eng.plan.step(li, q, k.contiguous(), sinks=attn.sinks.detach().contiguous())
            if attn.compressor is not None:
                c = self.rates[li]
                first = (h // c - (1 if getattr(attn.compressor, "indexer", None) else 0)) * c
                assert start <= max(first, 0), "the replay must cover the open windows' rows"
                x = entry[f"x{li}"][start:h]
                self._compress(eng, [(None, start, [0] * (h - start))], li, attn.compressor,
                               x, record=False)


def tiny_deepseek_v4_512():
    """The same model at DeepSeek-V4's real head shape: head_dim 512 with the 64 rotary
    dims [448, 512), the one shape the FP8_DS_MLA record (584 B) holds."""
    return tiny_deepseek_v4(head_dim=512, rotary_dims=64)
