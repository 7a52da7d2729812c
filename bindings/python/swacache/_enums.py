"""The C enumerations as :class:`enum.IntEnum` classes (values pinned by the header)."""

from __future__ import annotations

import enum



# ---- enums -------------------------------------------------------------------


class Format(enum.IntEnum):
    """``swa_format_t``: storage format of a layer's ring."""

    MXFP8 = 0
    BF16 = 1
    FP32 = 2
    #: DeepSeek-V4's 584-byte record (dim 512): 448 E4M3 NoPE codes, 64 BF16
    #: RoPE dims, 7 UE8M0 scales and a pad byte.
    FP8_DS_MLA = 3


class CompressKind(enum.IntEnum):
    """``swa_compress_kind_t``: what a layer's compression region holds."""

    #: ``compress_ratio + N`` entries of ``compress_entry_bytes`` the engine packs itself.
    OPAQUE = 0
    #: DeepSeek-V4 HCA: non-overlapping windows; source rows ``compress_head_dim`` wide.
    HCA = 1
    #: DeepSeek-V4 CSA: windows overlapping by one stride; rows ``2 * compress_head_dim``
    #: wide (Ca | Cb), optionally with the Lightning Indexer's compressor.
    CSA = 2


class DType(enum.IntEnum):
    """``swa_dtype_t``: element type of exchanged tensors."""

    FP32 = 0
    BF16 = 1


class ScaleMode(enum.IntEnum):
    """``swa_scale_mode_t``: MXFP8 scale rule."""

    CEIL = 0
    FLOOR = 1


class LayerRole(enum.IntEnum):
    """``swa_layer_role_t``."""

    STORED = 0
    DROPPED = 1


class Backend(enum.IntEnum):
    """``swa_backend_t``."""

    AUTO = 0
    CPU = 1
    CUDA = 2


class RopeStyle(enum.IntEnum):
    """``swa_rope_style_t``."""

    NONE = 0
    NEOX = 1
    GPTJ = 2


class PlanPath(enum.IntEnum):
    """``swa_plan_path_t``."""

    NONE = 0
    RING = 1
    STAGED = 2


class IndexPad(enum.IntEnum):
    """``swa_index_pad_t``."""

    NEG1 = 0
    LAST_ROW = 1


class WeightLayout(enum.IntEnum):
    """``swa_weight_layout_t`` (experimental)."""

    OUT_IN = 0
    IN_OUT = 1
