"""libswacache for Python: sliding-window-attention KV caches over the C ABI.

Pure Python over :mod:`ctypes`. The library is found through the
``SWACACHE_LIBRARY`` environment variable (the file, or its directory), then
the platform loader's search path; importing fails with
:class:`LibraryNotFoundError` naming both when it is missing, and with
:class:`VersionMismatchError` when its version does not fit the header this
binding was written for (:data:`HEADER_VERSION`).

Quick start::

    import numpy as np, swacache as sc
    layer = sc.Layer(q_heads=4, kv_heads=1, head_dim=64, kv_format=sc.Format.FP32)
    with sc.Cache(window=8, max_slots=4, layers=[layer]) as cache:
        slot = cache.alloc()
        with cache.plan() as plan:
            plan.build([sc.Seq(slot, seqlen_q=3, seqlen_k=3)])
            q = np.random.rand(3, 4, 64).astype(np.float32)
            k = np.random.rand(3, 1, 64).astype(np.float32)
            out = plan.step(0, q, k)      # [3, 4, 64] float32
"""

from ._lib import HEADER_VERSION, HEADER_VERSION_NUMBER, LibraryNotFoundError, VersionMismatchError
from ._cache import Cache, Slot
from ._codec import (
    attention_cpu_path,
    codec_cpu_path,
    decode,
    encode,
    format_vector_bytes,
    mxfp8_decode,
    mxfp8_encode,
)
from ._config import (
    CacheStats,
    Config,
    Layer,
    LayerLayout,
    Layout,
    PlanInfo,
    Seq,
    SlotInfo,
    TensorView,
    layout_compute,
)
from ._enums import (
    Backend,
    CompressKind,
    DType,
    Format,
    IndexPad,
    LayerRole,
    PlanPath,
    RopeStyle,
    ScaleMode,
    WeightLayout,
)
from ._plan import Plan
from ._compress import WINDOW_DTYPE as COMPRESS_WINDOW_DTYPE
from ._rope import RopeInfo, attention_merge, rope_apply, rope_table
from . import hf
from ._util import last_error, status_string, version, version_number
from ._stores import (
    BuiltinStore,
    DirectoryStore,
    MemoryStore,
    MemoryStoreStats,
    RedisClusterStore,
    RedisStore,
    Store,
    TieredStore,
    TierStats,
    live_python_stores,
)
from .errors import *  # noqa: F401,F403
from .errors import ERROR_CLASSES, Error, Status, error_for

__version__ = "0.2.0"
STORE_MAX_KEY_BYTES = 1024

__all__ = [n for n in dir() if not n.startswith("_")]
