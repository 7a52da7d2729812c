"""Layer descriptions from a Hugging Face transformers configuration.

``layer_descs(config)`` turns a transformers config object (or its
``to_dict()``) into the :class:`~swacache.Layer` of every sliding-window
layer and the window ``W`` to configure, following transformers' own rules
(docs/models.md has the same mapping as a table for C, Rust and Go engines):

- gpt-oss (``gpt_oss``), DeepSeek-V4 (``deepseek_v4``, every layer: sliding,
  HCA and CSA alike, whose window part the library holds), Gemma-2
  (``gemma2``), Gemma-3 (``gemma3_text``, or ``gemma3`` through its
  ``text_config``), Mistral (``mistral``), Ministral (``ministral``) and
  Qwen2's sliding layers (``qwen2`` with ``use_sliding_window``).
- The window is the config's ``sliding_window`` (the library's ``W`` counts
  the query's own token, as transformers' mask does).
- YaRN as ``_compute_yarn_parameters`` reads it: ``truncate`` from the
  *outer* ``rope_parameters`` dict (default True; per-layer dicts are never
  read), ``beta_fast``/``beta_slow`` of 0 or None become 32/1, a ``factor``
  of None becomes ``max_position_embeddings / original_max_position_embeddings``,
  and the cos/sin factor is ``attention_factor`` when given, else
  ``get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)`` when
  both are set and non-zero, else ``get_mscale(factor)``
  (``rope_attention_factor``, passed explicitly).
- Rotary dims ``int(head_dim * partial_rotary_factor)``: a leading slice
  (NEOX pairs) for every model but DeepSeek-V4, whose trailing slice pairs
  interleaved (GPTJ) and whose output is de-rotated.
- Sinks (gpt-oss, DeepSeek-V4), the logit soft-cap
  (``attn_logit_softcapping``) and the softmax scale
  (``query_pre_attn_scalar ** -0.5`` for Gemma) go into the layer.

With ``compressors=True``, DeepSeek-V4's CSA and HCA layers also declare their
typed compressor (docs/models.md, "DeepSeek-V4's compressors"): ``compress_kind``
from the layer type, ``compress_ratio`` from ``compress_rates``,
``compress_head_dim`` = ``head_dim``, ``compress_rope_dims`` = the layer's rotary
dims (the "compress" table), ``index_head_dim`` for CSA (the Lightning Indexer's
compressor), rows kept in ``compress_row_format`` (FP32 by default: exact).

Full-attention layers are not sliding-window layers and are left out (keep
them in the engine's own KV cache); ``HfLayers.model_layers`` maps each
returned layer to its model layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping

from ._config import Layer
from ._enums import CompressKind, Format, RopeStyle
from .errors import InvalidArgumentError, UnimplementedError

SUPPORTED = ("gpt_oss", "deepseek_v4", "gemma2", "gemma3_text", "gemma3", "mistral",
             "ministral", "qwen2")


@dataclass
class HfLayers:
    """What a transformers config gives the library."""

    model_type: str
    window: int  # W for swa_config_t.window
    layers: List[Layer]  # one per sliding-window layer, in model order
    model_layers: List[int]  # the model layer index of each


def _get(cfg: Any, name: str, default: Any = None) -> Any:
    if isinstance(cfg, Mapping):
        return cfg.get(name, default)
    return getattr(cfg, name, default)


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn_fields(rp: Mapping[str, Any], outer: Mapping[str, Any],
                max_position_embeddings: Any) -> Dict[str, Any]:
    """The libswacache YaRN fields of one rope dict ``rp`` (``outer`` is the
    config's whole ``rope_parameters``, where transformers reads ``truncate``)."""
    L = rp.get("original_max_position_embeddings") or max_position_embeddings
    if not L:
        raise InvalidArgumentError("rope_parameters: YaRN without original_max_position_embeddings")
    factor = rp.get("factor")
    if factor is None:
        if not max_position_embeddings:
            raise InvalidArgumentError("rope_parameters: YaRN factor None without "
                                       "max_position_embeddings")
        factor = max_position_embeddings / L
    af = rp.get("attention_factor")
    if af is None:
        ms, msa = rp.get("mscale"), rp.get("mscale_all_dim")
        af = _mscale(factor, ms) / _mscale(factor, msa) if ms and msa else _mscale(factor)
    return dict(rope_yarn_factor=float(factor), rope_yarn_original_max_positions=int(L),
                rope_yarn_beta_fast=float(rp.get("beta_fast") or 32.0),
                rope_yarn_beta_slow=float(rp.get("beta_slow") or 1.0),
                rope_yarn_truncate=bool(outer.get("truncate", True)),
                rope_attention_factor=float(af))


def _rope_dict(cfg: Any, model_type: str, layer_type: str) -> Dict[str, Any]:
    rp = _get(cfg, "rope_parameters")
    if rp is None:  # an older config: rope_theta and rope_scaling at the top
        rp = dict(_get(cfg, "rope_scaling") or {})
        rp.setdefault("rope_theta", _get(cfg, "rope_theta", 10000.0))
        return rp
    if model_type == "deepseek_v4":
        return dict(rp["main" if layer_type == "sliding_attention" else "compress"])
    if rp and all(isinstance(v, Mapping) for v in rp.values()):
        if layer_type not in rp:
            raise InvalidArgumentError(f"rope_parameters has no entry for layer type "
                                       f"{layer_type!r} (it has {sorted(rp)})")
        return dict(rp[layer_type])
    return dict(rp)


def layer_descs(config: Any, *, kv_format: Format = Format.BF16, compressors: bool = False,
                compress_row_format: Format = Format.FP32) -> HfLayers:
    """The sliding-window layers of a transformers config (a ``PretrainedConfig``
    or its dict) as :class:`~swacache.Layer` descriptions, and the window.
    ``kv_format`` is the ring format of every layer; ``compressors`` (DeepSeek-V4
    only) adds the CSA/HCA layers' typed compressors, their rows in
    ``compress_row_format``. Raises
    UnimplementedError for a model type or RoPE type not listed in the module
    doc, InvalidArgumentError for a config without sliding-window layers."""
    model_type = _get(config, "model_type")
    if model_type == "gemma3" and _get(config, "text_config") is not None:
        config, model_type = _get(config, "text_config"), "gemma3_text"
    if model_type not in SUPPORTED:
        raise UnimplementedError(f"model_type {model_type!r}: swacache.hf knows {SUPPORTED}")
    if compressors and model_type != "deepseek_v4":
        raise InvalidArgumentError(f"compressors=True: {model_type} has no compressed layers "
                                   "(only deepseek_v4 does)")
    n_layers = int(_get(config, "num_hidden_layers"))
    window = _get(config, "sliding_window")
    types = _get(config, "layer_types")
    if types is None:  # Mistral: every layer slides when a window is set
        types = ["sliding_attention" if window is not None else "full_attention"] * n_layers
    if model_type == "deepseek_v4":
        sliding = list(range(n_layers))  # every layer keeps the sliding window part
    else:
        sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if window is None or not sliding:
        raise InvalidArgumentError(f"{model_type}: the config has no sliding-window layers "
                                   f"(sliding_window = {window!r})")
    hq = int(_get(config, "num_attention_heads"))
    hkv = int(_get(config, "num_key_value_heads") or hq)
    head_dim = _get(config, "head_dim") or int(_get(config, "hidden_size")) // hq
    head_dim = int(head_dim)
    dsv4 = model_type == "deepseek_v4"
    softcap = float(_get(config, "attn_logit_softcapping") or 0.0)
    qpas = _get(config, "query_pre_attn_scalar")
    scale = float(qpas) ** -0.5 if model_type in ("gemma2", "gemma3_text") and qpas else 0.0
    outer = _get(config, "rope_parameters") or {}
    max_pos = _get(config, "max_position_embeddings")
    layers = []
    for i in sliding:
        rp = _rope_dict(config, model_type, types[i])
        prf = rp.get("partial_rotary_factor", _get(config, "partial_rotary_factor", 1.0)) or 1.0
        n = int(head_dim * prf)
        fields: Dict[str, Any] = dict(
            q_heads=hq, kv_heads=1 if dsv4 else hkv, head_dim=head_dim, shared_kv=dsv4,
            kv_format=kv_format, has_sinks=model_type in ("gpt_oss", "deepseek_v4"),
            rope_style=RopeStyle.GPTJ if dsv4 else RopeStyle.NEOX,
            rope_first_dim=head_dim - n if dsv4 else 0, rope_dims=n,
            rope_theta=float(rp.get("rope_theta", _get(config, "rope_theta", 10000.0))),
            rope_derotate_output=dsv4, logit_softcap=softcap, softmax_scale=scale)
        rope_type = rp.get("rope_type", rp.get("type", "default")) or "default"
        if rope_type == "yarn":
            fields.update(yarn_fields(rp, outer if isinstance(outer, Mapping) else {}, max_pos))
        elif rope_type != "default":
            raise UnimplementedError(f"layer {i}: rope_type {rope_type!r} (the library "
                                     "computes plain RoPE and YaRN)")
        if compressors and dsv4 and types[i] != "sliding_attention":
            fields.update(_compressor_fields(config, types[i], n, compress_row_format))
        layers.append(Layer(**fields))
    return HfLayers(model_type, int(window), layers, sliding)


def _compressor_fields(config: Any, layer_type: str, rope_dims: int,
                       row_format: Format) -> Dict[str, Any]:
    """A DeepSeek-V4 CSA/HCA layer's compressor, as transformers builds it:
    DeepseekV4CSACompressor / DeepseekV4HCACompressor (width head_dim, rate
    compress_rates[layer_type]) and, for CSA, DeepseekV4Indexer's compressor
    (width index_head_dim); both rotate the trailing rotary dims of each entry
    with the "compress" table at position w * rate."""
    kinds = {"compressed_sparse_attention": CompressKind.CSA,
             "heavily_compressed_attention": CompressKind.HCA}
    if layer_type not in kinds:
        raise UnimplementedError(f"layer type {layer_type!r}: swacache.hf knows the "
                                 f"compressors of {sorted(kinds)}")
    rates = _get(config, "compress_rates") or {}
    if layer_type not in rates:
        raise InvalidArgumentError(f"compress_rates has no rate for {layer_type!r} "
                                   f"(it has {sorted(rates)})")
    hq = int(_get(config, "num_attention_heads"))
    head_dim = int(_get(config, "head_dim") or int(_get(config, "hidden_size")) // hq)
    kind = kinds[layer_type]
    return dict(compress_kind=kind, compress_ratio=int(rates[layer_type]),
                compress_head_dim=head_dim, compress_rope_dims=rope_dims,
                compress_row_format=row_format,
                index_head_dim=int(_get(config, "index_head_dim")) if kind == CompressKind.CSA
                else 0)
