"""swacache.hf.layer_descs against transformers itself (no download: the
config classes transformers ships, with their defaults or small sizes).

- Every supported config: the window, which model layers slide, and the
  library's RoPE table for each (swa_rope_table: frequencies and cos/sin
  factor) against the model's own rotary embedding built from the same
  config; each YaRN rule (truncate read from the outer dict, beta 0/None ->
  32/1, factor None -> max/original max positions, mscale/mscale_all_dim ->
  the cos/sin factor) against transformers' _compute_yarn_parameters.
- For gpt-oss, Gemma-2, Gemma-3, Mistral, Ministral and Qwen2 (sliding
  layers): a step of a cache configured by layer_descs equals the model's
  attention module (eager, random weights, a window smaller than the
  sequence), given the module's own pre-RoPE q, k, v: the output before o_proj.
"""

import math

import numpy as np
import pytest

import swacache as sc

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402


def ulps(a, b):
    a = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    b = np.asarray(b, np.float32).view(np.int32).astype(np.int64)
    return np.abs(a - b)


def rotary_of(model_type):
    import importlib
    mods = {"gpt_oss": ("gpt_oss", "GptOss"), "deepseek_v4": ("deepseek_v4", "DeepseekV4"),
            "gemma2": ("gemma2", "Gemma2"), "gemma3_text": ("gemma3", "Gemma3"),
            "mistral": ("mistral", "Mistral"), "ministral": ("ministral", "Ministral"),
            "qwen2": ("qwen2", "Qwen2")}
    pkg, prefix = mods[model_type]
    m = importlib.import_module(f"transformers.models.{pkg}.modeling_{pkg}")
    return m, prefix


def hf_table(cfg, model_type, layer_type):
    m, prefix = rotary_of(model_type)
    rot = getattr(m, prefix + "RotaryEmbedding")(cfg)
    key = {"deepseek_v4": "main" if layer_type == "sliding_attention" else "compress"}.get(
        model_type, layer_type)
    if hasattr(rot, f"{key}_inv_freq"):
        return getattr(rot, f"{key}_inv_freq").numpy(), getattr(rot, f"{key}_attention_scaling")
    return rot.inv_freq.numpy(), rot.attention_scaling


CONFIGS = {
    "gpt_oss": lambda: transformers.GptOssConfig(),
    "deepseek_v4": lambda: transformers.DeepseekV4Config(),
    # YaRN on the compressed layers (as the engine example's tiny model).
    "deepseek_v4_yarn": lambda: transformers.DeepseekV4Config(
        num_hidden_layers=4, layer_types=["sliding_attention", "compressed_sparse_attention",
                                          "heavily_compressed_attention",
                                          "compressed_sparse_attention"],
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "beta_fast": 32.0,
                         "original_max_position_embeddings": 65536, "beta_slow": 1.0},
        max_position_embeddings=16 * 65536),
    "gemma2": lambda: transformers.Gemma2Config(),
    "gemma3_text": lambda: transformers.Gemma3TextConfig(),
    "mistral": lambda: transformers.MistralConfig(),
    "ministral": lambda: transformers.MinistralConfig(),
    "qwen2": lambda: transformers.Qwen2Config(use_sliding_window=True, sliding_window=4096,
                                              max_window_layers=20),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_shipped_configs_map_to_the_models_own_tables(name):
    cfg = CONFIGS[name]()
    name = cfg.model_type
    got = sc.hf.layer_descs(cfg)
    assert got.window == cfg.sliding_window
    types = getattr(cfg, "layer_types", None) or ["sliding_attention"] * cfg.num_hidden_layers
    want = (list(range(cfg.num_hidden_layers)) if name == "deepseek_v4"
            else [i for i, t in enumerate(types) if t == "sliding_attention"])
    assert got.model_layers == want and len(got.layers) == len(want)
    for i, lay in zip(got.model_layers, got.layers):
        f, info = sc.rope_table(lay)
        hf_f, hf_af = hf_table(cfg, name, types[i])
        assert f.shape == hf_f.shape, (name, i)
        # torch's CPU pow is itself 1 ulp off for a few entries (docs/models.md).
        assert ulps(f, hf_f).max() <= 1, (name, i, ulps(f, hf_f).max())
        assert np.float32(info.attention_factor) == np.float32(hf_af), (name, i)
    # The same config through its dict.
    assert sc.hf.layer_descs(cfg.to_dict()).layers == got.layers


def test_gemma3_composite_config_and_model_specifics():
    g = sc.hf.layer_descs(transformers.Gemma3Config())
    assert g.model_type == "gemma3_text" and g.layers[0].softmax_scale == pytest.approx(256 ** -0.5)
    g2 = sc.hf.layer_descs(transformers.Gemma2Config()).layers[0]
    assert g2.logit_softcap == 50.0 and g2.softmax_scale == pytest.approx(256 ** -0.5)
    oss = sc.hf.layer_descs(transformers.GptOssConfig()).layers[0]
    assert oss.has_sinks and not oss.shared_kv and oss.rope_yarn_truncate is False
    v4 = sc.hf.layer_descs(transformers.DeepseekV4Config()).layers[0]
    assert (v4.rope_style, v4.rope_first_dim, v4.rope_dims, v4.shared_kv, v4.kv_heads) == \
        (sc.RopeStyle.GPTJ, 448, 64, True, 1)
    assert v4.rope_derotate_output and v4.has_sinks
    with pytest.raises(sc.InvalidArgumentError, match="no sliding-window layers"):
        sc.hf.layer_descs(transformers.Qwen2Config())
    with pytest.raises(sc.UnimplementedError, match="llama"):
        sc.hf.layer_descs(transformers.LlamaConfig())


YARN_EDITS = {
    "as_shipped": {},
    "truncate_true_outer": {"truncate": True},
    "beta_zero": {"beta_fast": 0, "beta_slow": 0},
    "beta_none": {"beta_fast": None, "beta_slow": None},
    "factor_none": {"factor": None},
    "mscale_pair": {"mscale": 0.7, "mscale_all_dim": 1.3},
    "attention_factor_given": {"attention_factor": 1.125, "mscale": 0.7, "mscale_all_dim": 1.3},
}


@pytest.mark.parametrize("edit", sorted(YARN_EDITS))
def test_yarn_rules_against_transformers(edit):
    cfg = transformers.GptOssConfig()
    rp = dict(cfg.rope_parameters)
    rp.update(YARN_EDITS[edit])
    cfg.rope_parameters = rp
    lay = sc.hf.layer_descs(cfg).layers[0]
    f, info = sc.rope_table(lay)
    hf_f, hf_af = ROPE_INIT_FUNCTIONS["yarn"](cfg, None)
    assert ulps(f, hf_f.numpy()).max() <= 1, edit
    assert np.float32(info.attention_factor) == np.float32(hf_af), edit


def test_truncate_is_read_from_the_outer_dict_only():
    # Gemma-3-style per-layer-type dicts: a "truncate" inside one is never read.
    cfg = transformers.Gemma3TextConfig()
    rp = {k: dict(v) for k, v in cfg.rope_parameters.items()}
    rp["sliding_attention"].update(rope_type="yarn", factor=8.0, truncate=False,
                                   original_max_position_embeddings=4096)
    lay = sc.hf.yarn_fields(rp["sliding_attention"], rp, 131072)
    assert lay["rope_yarn_truncate"] is True


# ---- attention modules ----------------------------------------------------

W, T = 8, 21


def small(name):
    base = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                num_hidden_layers=2, intermediate_size=32, sliding_window=W, vocab_size=32)
    if name == "gpt_oss":
        return transformers.GptOssConfig(**base, num_local_experts=2, num_experts_per_tok=1)
    if name == "gemma2":
        return transformers.Gemma2Config(**base, query_pre_attn_scalar=24)
    if name == "gemma3_text":
        return transformers.Gemma3TextConfig(**base, query_pre_attn_scalar=24)
    if name == "mistral":
        return transformers.MistralConfig(**base)
    if name == "ministral":
        return transformers.MinistralConfig(**base)
    if name == "qwen2":
        base.pop("head_dim")
        return transformers.Qwen2Config(**base, use_sliding_window=True, max_window_layers=0)
    raise KeyError(name)


@pytest.mark.parametrize("name", ["gpt_oss", "gemma2", "gemma3_text", "mistral", "ministral",
                                  "qwen2"])
def test_a_configured_step_matches_the_attention_module(name):
    cfg = small(name)
    cfg._attn_implementation = "eager"
    m, prefix = rotary_of(name)
    got = sc.hf.layer_descs(cfg, kv_format=sc.Format.FP32)
    li = got.model_layers[0]
    lay = got.layers[0]
    torch.manual_seed(0)
    attn = getattr(m, prefix + "Attention")(cfg, li).float().eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.3)
    rot = getattr(m, prefix + "RotaryEmbedding")(cfg)
    h = torch.randn(1, T, cfg.hidden_size)
    pos = torch.arange(T)[None]
    types = getattr(cfg, "layer_types", None)
    try:
        cos, sin = rot(h, pos, types[li]) if types and hasattr(rot, "sliding_attention_inv_freq") \
            else rot(h, pos)
    except TypeError:
        cos, sin = rot(h, pos)
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    visible = (ki <= qi) & (qi - ki < W)
    mask = torch.where(visible, 0.0, float("-inf"))[None, None]
    seen = {}
    q_src = getattr(attn, "q_norm", None) or attn.q_proj
    k_src = getattr(attn, "k_norm", None) or attn.k_proj
    hooks = [q_src.register_forward_hook(lambda mod, i, o: seen.__setitem__("q", o)),
             k_src.register_forward_hook(lambda mod, i, o: seen.__setitem__("k", o)),
             attn.v_proj.register_forward_hook(lambda mod, i, o: seen.__setitem__("v", o)),
             attn.o_proj.register_forward_pre_hook(lambda mod, i: seen.__setitem__("o", i[0]))]
    with torch.no_grad():
        attn(h, position_embeddings=(cos, sin), attention_mask=mask)
    for hk in hooks:
        hk.remove()
    D = lay.head_dim

    def tokens_first(x, heads):  # [1, T, H*D], [1, T, H, D] or [1, H, T, D] -> [T, H, D]
        if x.dim() == 4 and x.shape[1] == heads and x.shape[2] == T:
            x = x.transpose(1, 2)
        return x.reshape(T, heads, D).contiguous()

    q = tokens_first(seen["q"], lay.q_heads)
    k = tokens_first(seen["k"], lay.kv_heads)
    v = tokens_first(seen["v"], lay.kv_heads)
    want = seen["o"].reshape(T, lay.q_heads, D).numpy().astype(np.float64)
    sinks = attn.sinks.detach().float().contiguous() if lay.has_sinks else None
    with sc.Cache(window=got.window, max_slots=1, layers=[lay]) as c:
        s = c.alloc()
        with c.plan() as p:
            p.build([(s, T, T)])
            out = p.step(0, q, k, v, sinks=sinks)
    err = np.abs(out.numpy() - want).max() / np.abs(want).max()
    assert err < 2e-5, (name, err)
