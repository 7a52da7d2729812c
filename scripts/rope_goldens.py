#!/usr/bin/env python3
"""Generate rope_goldens.h: RoPE reference tables computed by Hugging Face
transformers' own rotary-embedding code, for libswacache's C++ unit tests.

For each case the header holds, all in FP32 and written as hex-float literals
(exact bit patterns):

  * inv_freq[n/2]            the frequencies transformers' rope init returns
  * attention_factor         the factor transformers multiplies cos and sin by
  * angle[P][n/2]            position (as FP32) * inv_freq (FP32), one rounding
  * cos[P][n/2], sin[P][n/2] what the model's rotary-embedding forward returns
                             in FP32, i.e. attention_factor * cos(angle) and
                             attention_factor * sin(angle)

at the positions listed in kPositions.  Run with the venv that has torch and
transformers:

    /tmp/tfvenv/bin/python rope_goldens.py > rope_goldens.h

Nothing here downloads a model: configs are built in code from the values of
the published checkpoints' config.json files (see the PARAMS comments).
"""

import math
import sys

import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

POSITIONS = [0, 1, 7, 4095, 4096, 131071]


def f32(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float32).item())


def hexf(x: float) -> str:
    """C++ hex-float literal of an FP32 value (exact)."""
    x = f32(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError("non-finite golden value")
    if x == 0.0:
        return "-0x0p+0f" if math.copysign(1.0, x) < 0 else "0x0p+0f"
    h = x.hex()  # e.g. 0x1.58b90c0000000p+0
    mant, exp = h.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return mant + "p" + exp + "f"


def case_gpt_oss():
    from transformers.models.gpt_oss.configuration_gpt_oss import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

    rope = {
        "rope_type": "yarn",
        "rope_theta": 150000.0,
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 4096,
    }
    cfg = GptOssConfig(
        num_hidden_layers=24, num_local_experts=32, head_dim=64, num_attention_heads=64,
        num_key_value_heads=8, hidden_size=2880, max_position_embeddings=131072,
        sliding_window=128, rope_parameters=dict(rope),
    )
    emb = GptOssRotaryEmbedding(cfg)
    inv_freq = emb.inv_freq.detach().clone()
    af = float(emb.attention_scaling)
    pos = torch.tensor([POSITIONS], dtype=torch.int64)
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = emb(x, pos)  # [1, P, 32] (gpt-oss does not duplicate halves)
    return dict(
        name="kGptOss20b",
        title="gpt-oss-20b (GptOssRotaryEmbedding, YaRN)",
        params=[
            "class: transformers.models.gpt_oss.modeling_gpt_oss.GptOssRotaryEmbedding",
            "init: ROPE_INIT_FUNCTIONS['yarn'] = _compute_yarn_parameters",
            "head_dim 64, rotary dims 64 (whole head), style NEOX (rotate half)",
            "rope_theta 150000, factor 32, original_max_position_embeddings 4096,",
            "beta_fast 32, beta_slow 1, truncate False (no floor/ceil),",
            "attention_factor unset -> 0.1*ln(32)+1 (get_mscale)",
            "max_position_embeddings 131072",
        ],
        inv_freq=inv_freq, af=af, cos=cos[0], sin=sin[0],
        cfg=dict(theta=150000.0, dims=64, yarn_factor=32.0, orig=4096, beta_fast=32.0,
                 beta_slow=1.0, truncate=0, attention_factor_cfg=0.0),
    )


def _v4_config():
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

    # DeepSeek-V4-Flash config.json values: rope_theta 10000, compress_rope_theta
    # 160000, rope_scaling {type yarn, factor 16, original_max_position_embeddings
    # 65536, beta_fast 32, beta_slow 1}, max_position_embeddings 1048576,
    # head_dim 512, qk_rope_head_dim 64.
    return DeepseekV4Config(
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        max_position_embeddings=1048576,
        head_dim=512,
        num_hidden_layers=4,  # irrelevant to RoPE; kept small
        rope_parameters={
            "rope_type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 65536,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    )


def _v4_case(label: str):
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    cfg = _v4_config()
    emb = DeepseekV4RotaryEmbedding(cfg)
    inv_freq = getattr(emb, f"{label}_inv_freq").detach().clone()
    af = float(getattr(emb, f"{label}_attention_scaling"))
    pos = torch.tensor([POSITIONS], dtype=torch.int64)
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = emb(x, pos, layer_type=label)  # [1, P, 32], one entry per interleaved pair
    return cfg, inv_freq, af, cos[0], sin[0]


def case_v4_compress():
    cfg, inv_freq, af, cos, sin = _v4_case("compress")
    rp = cfg.rope_parameters["compress"]
    return dict(
        name="kDeepseekV4Compress",
        title="DeepSeek-V4 'compress' rope (CSA/HCA layers, compressor, indexer)",
        params=[
            "class: transformers.models.deepseek_v4.modeling_deepseek_v4.DeepseekV4RotaryEmbedding,",
            "layer_type 'compress'; init: ROPE_INIT_FUNCTIONS['yarn'] = _compute_yarn_parameters",
            "head_dim 512, rotary dims 64 = the LAST 64 dims [448, 512), style GPTJ (interleaved pairs)",
            "rope_theta = compress_rope_theta 160000, factor 16,",
            "original_max_position_embeddings 65536, beta_fast 32, beta_slow 1,",
            "truncate: True in effect (transformers reads config.rope_parameters.get('truncate', True)",
            "  from the outer {main, compress} dict, which never has the key),",
            "attention_factor forced to 1.0 by DeepseekV4Config.__post_init__",
            "max_position_embeddings 1048576",
            "rope_parameters['compress'] as built by transformers: " + repr(rp),
        ],
        inv_freq=inv_freq, af=af, cos=cos, sin=sin,
        cfg=dict(theta=160000.0, dims=64, yarn_factor=16.0, orig=65536, beta_fast=32.0,
                 beta_slow=1.0, truncate=1, attention_factor_cfg=1.0),
    )


def case_v4_main():
    cfg, inv_freq, af, cos, sin = _v4_case("main")
    rp = cfg.rope_parameters["main"]
    return dict(
        name="kDeepseekV4Main",
        title="DeepSeek-V4 'main' rope (sliding-only layers)",
        params=[
            "class: DeepseekV4RotaryEmbedding, layer_type 'main';",
            "init: DeepseekV4RotaryEmbedding.compute_default_rope_parameters",
            "head_dim 512, rotary dims 64 = the LAST 64 dims [448, 512), style GPTJ (interleaved pairs)",
            "rope_theta 10000, no YaRN, attention_factor 1.0",
            "rope_parameters['main'] as built by transformers: " + repr(rp),
        ],
        inv_freq=inv_freq, af=af, cos=cos, sin=sin,
        cfg=dict(theta=10000.0, dims=64, yarn_factor=0.0, orig=0, beta_fast=0.0,
                 beta_slow=0.0, truncate=0, attention_factor_cfg=0.0),
    )


def case_default():
    from transformers.models.llama.configuration_llama import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=512, num_attention_heads=8, head_dim=64,
                      num_hidden_layers=1, rope_parameters={"rope_type": "default",
                                                            "rope_theta": 10000.0})
    emb = LlamaRotaryEmbedding(cfg)
    inv_freq = emb.inv_freq.detach().clone()
    af = float(emb.attention_scaling)
    pos = torch.tensor([POSITIONS], dtype=torch.int64)
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = emb(x, pos)  # [1, P, 64]: the 32 frequencies duplicated (NEOX halves)
    half = inv_freq.numel()
    assert torch.equal(cos[0, :, :half], cos[0, :, half:])
    return dict(
        name="kDefault10k",
        title="plain RoPE, theta 10000, 64 rotary dims (LlamaRotaryEmbedding)",
        params=[
            "class: transformers.models.llama.modeling_llama.LlamaRotaryEmbedding,",
            "init: LlamaRotaryEmbedding.compute_default_rope_parameters",
            "rotary dims 64, rope_theta 10000, attention_factor 1.0",
            "(the forward duplicates the 32 values over both halves; only the first half is kept)",
        ],
        inv_freq=inv_freq, af=af, cos=cos[0, :, :half], sin=sin[0, :, :half],
        cfg=dict(theta=10000.0, dims=64, yarn_factor=0.0, orig=0, beta_fast=0.0,
                 beta_slow=0.0, truncate=0, attention_factor_cfg=0.0),
    )


def emit_array_1d(out, name, values):
    out.append(f"inline constexpr float {name}[{len(values)}] = {{")
    for i in range(0, len(values), 4):
        out.append("    " + ", ".join(hexf(v) for v in values[i:i + 4]) + ",")
    out.append("};")


def emit_array_2d(out, name, rows):
    n = len(rows[0])
    out.append(f"inline constexpr float {name}[{len(rows)}][{n}] = {{")
    for r, row in enumerate(rows):
        out.append(f"    {{  // position {POSITIONS[r]}")
        for i in range(0, n, 4):
            out.append("        " + ", ".join(hexf(v) for v in row[i:i + 4]) + ",")
        out.append("    },")
    out.append("};")


def main():
    cases = [case_gpt_oss(), case_v4_compress(), case_v4_main(), case_default()]
    out = []
    out.append("// rope_goldens.h -- generated by rope_goldens.py; do not edit by hand.")
    out.append("//")
    out.append("// RoPE tables computed by Hugging Face transformers' own rotary-embedding")
    out.append("// classes (CPU, FP32), for comparing libswacache's table computation with")
    out.append("// transformers without Python.")
    out.append(f"//   transformers {transformers.__version__}, torch {torch.__version__}, "
               f"python {sys.version.split()[0]}")
    out.append("//")
    out.append("// Per case, all FP32 (hex-float literals, exact):")
    out.append("//   kX_inv_freq[i]        frequency i (n/2 of them, n = rotary dims)")
    out.append("//   kX_attention_factor   factor transformers multiplies cos and sin by")
    out.append("//   kX_angle[p][i]        float(position) * inv_freq[i], one FP32 rounding")
    out.append("//                         (exact: compare bit for bit)")
    out.append("//   kX_cos[p][i], kX_sin  attention_factor * cos(angle), attention_factor * sin(angle),")
    out.append("//                         as the model's rotary embedding returns them in FP32")
    out.append("//                         (torch CPU cos/sin: compare within a few ulp, the")
    out.append("//                         library's cosf/sinf or __cosf need not be bitwise equal)")
    out.append("// Frequency i rotates the pair (first+i, first+i+n/2) for NEOX and")
    out.append("// (first+2i, first+2i+1) for GPTJ; the tables do not depend on the style.")
    out.append("")
    out.append("#pragma once")
    out.append("")
    out.append("#include <cstdint>")
    out.append("")
    out.append("namespace swa_rope_goldens {")
    out.append("")
    out.append(f"inline constexpr int kNumPositions = {len(POSITIONS)};")
    out.append("inline constexpr int64_t kPositions[kNumPositions] = {"
               + ", ".join(str(p) for p in POSITIONS) + "};")
    out.append("")
    for c in cases:
        name = c["name"]
        inv = [float(v) for v in c["inv_freq"].to(torch.float32).tolist()]
        nf = len(inv)
        pos_f = torch.tensor(POSITIONS, dtype=torch.int64).to(torch.float32)
        angle = (pos_f[:, None] * c["inv_freq"].to(torch.float32)[None, :]).tolist()
        cos = c["cos"].to(torch.float32).tolist()
        sin = c["sin"].to(torch.float32).tolist()
        # self-check: the forward's cos equals af * cos(angle) computed here
        chk = (torch.tensor(angle, dtype=torch.float32).cos() * c["af"]).tolist()
        assert chk == cos, f"{name}: forward cos differs from af*cos(pos*inv_freq)"
        cf = c["cfg"]
        out.append("// " + "-" * 74)
        out.append(f"// {c['title']}")
        out.append("// PARAMS:")
        for line in c["params"]:
            out.append(f"//   {line}")
        out.append(f"//   computed attention_factor = {c['af']!r} (FP32 {hexf(c['af'])})")
        out.append("// libswacache layer fields that reproduce it:")
        out.append(f"//   rope_theta {cf['theta']}, rope_dims {cf['dims']}, rope_yarn_factor {cf['yarn_factor']},")
        out.append(f"//   rope_yarn_original_max_positions {cf['orig']}, rope_yarn_beta_fast {cf['beta_fast']},")
        out.append(f"//   rope_yarn_beta_slow {cf['beta_slow']}, rope_yarn_truncate {cf['truncate']},")
        out.append(f"//   rope_attention_factor {cf['attention_factor_cfg']} (0 = YaRN default)")
        out.append("// " + "-" * 74)
        out.append(f"inline constexpr int {name}_num_freqs = {nf};")
        out.append(f"inline constexpr float {name}_theta = {hexf(cf['theta'])};")
        out.append(f"inline constexpr float {name}_attention_factor = {hexf(c['af'])};")
        emit_array_1d(out, f"{name}_inv_freq", inv)
        emit_array_2d(out, f"{name}_angle", angle)
        emit_array_2d(out, f"{name}_cos", cos)
        emit_array_2d(out, f"{name}_sin", sin)
        out.append("")
    out.append("}  // namespace swa_rope_goldens")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
