"""swa_compress_step against transformers' own DeepSeek-V4 compressors and caches.

Oracle: DeepseekV4HCACompressor and DeepseekV4CSACompressor (whose forward also
runs the Lightning Indexer's compressor) with DeepseekV4HCACache /
DeepseekV4CSACache, on a tiny random config (CSA rate 4 with the indexer, HCA
rate 8), fed one token per call: the entries a sequence of accepted tokens
emits. The library, through its C ABI (ctypes, SWACACHE_LIB), gets the same
projected kv and gate rows (kv_proj / gate_proj of the same hidden states) in
chunks of every size 1 .. 2m + N + 1, each followed by 0 .. N draft rows of
garbage that the next step rejects (it starts at the first draft). Checked:
every entry the library emits whose window holds accepted positions only
equals transformers' (FP32 rounding: |diff| <= 2e-6 + 2e-6 |ref|), and the
final entries, after every rejection overwrote the entries drafts had closed,
equal transformers' all (a sequence that never saw the drafts). FP32 rows;
also BF16 rings against transformers fed the same BF16-rounded rows.
Run by ctest (compress_oracle) with the torch venv; skipped without torch.
"""
import ctypes
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")
from transformers import DeepseekV4Config  # noqa: E402
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf  # noqa: E402

OK, FAILED_PRECONDITION = 0, 9
CPU, FP32, BF16_FMT, HCA, CSA = 1, 2, 1, 1, 2
N = 2
HIDDEN, D, DI, ROPE = 32, 16, 8, 8


class LayerDesc(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("role", ctypes.c_int),
                ("q_heads", ctypes.c_uint32), ("kv_heads", ctypes.c_uint32),
                ("head_dim", ctypes.c_uint32), ("shared_kv", ctypes.c_uint32),
                ("kv_format", ctypes.c_int), ("compress_ratio", ctypes.c_uint32),
                ("compress_entry_bytes", ctypes.c_uint32), ("rope_theta", ctypes.c_float),
                ("rope_dims", ctypes.c_uint32), ("has_sinks", ctypes.c_uint32),
                ("rope_style", ctypes.c_int), ("rope_first_dim", ctypes.c_uint32),
                ("rope_yarn_factor", ctypes.c_float), ("yarn_orig", ctypes.c_uint32),
                ("beta_fast", ctypes.c_float), ("beta_slow", ctypes.c_float),
                ("yarn_truncate", ctypes.c_uint32), ("rope_attention_factor", ctypes.c_float),
                ("derotate", ctypes.c_uint32), ("softcap", ctypes.c_float),
                ("softmax_scale", ctypes.c_float), ("reserved", ctypes.c_uint32),
                ("compress_kind", ctypes.c_int), ("compress_head_dim", ctypes.c_uint32),
                ("compress_rope_dims", ctypes.c_uint32), ("compress_row_format", ctypes.c_int),
                ("index_head_dim", ctypes.c_uint32), ("compress_reserved", ctypes.c_uint32)]


class Config(ctypes.Structure):  # the 0.2 fields; init may write a newer version's tail
    _fields_ = [("struct_size", ctypes.c_size_t), ("window", ctypes.c_uint32),
                ("draft_tokens", ctypes.c_uint32), ("ring_len", ctypes.c_uint32),
                ("alignment", ctypes.c_uint32), ("max_slots", ctypes.c_uint32),
                ("backend", ctypes.c_int), ("device", ctypes.c_int32),
                ("scale_mode", ctypes.c_int), ("num_threads", ctypes.c_uint32),
                ("num_layers", ctypes.c_uint32), ("layers", ctypes.c_void_p),
                ("pool", ctypes.c_void_p), ("pool_bytes", ctypes.c_size_t),
                ("_tail", ctypes.c_uint8 * 256)]


class Seq(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_uint32), ("seqlen_q", ctypes.c_int32),
                ("seqlen_k", ctypes.c_int32), ("valid_start", ctypes.c_int32)]


class Window(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("seq", "slot")] + [
        (n, ctypes.c_int32) for n in ("entry", "position", "first_position", "n_missing",
                                      "n_ring", "ring_row", "n_new", "new_row")]


class Args(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("layer", ctypes.c_uint32),
                ("compressor", ctypes.c_uint32), ("kv", ctypes.c_void_p),
                ("gate", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("row_width", ctypes.c_uint32), ("rows", ctypes.c_int64),
                ("position_bias", ctypes.c_void_p), ("norm_weight", ctypes.c_void_p),
                ("norm_eps", ctypes.c_float), ("out", ctypes.c_void_p),
                ("out_dtype", ctypes.c_int), ("out_rows", ctypes.c_uint64),
                ("stream", ctypes.c_void_p)]


assert ctypes.sizeof(LayerDesc) == 128 and ctypes.sizeof(Args) == 104
assert ctypes.sizeof(Window) == 40


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("SWACACHE_LIB")
    if not path:
        pytest.skip("SWACACHE_LIB is not set")
    so = ctypes.CDLL(path)
    so.swa_last_error.restype = ctypes.c_char_p
    return so


def check(lib, st, want=OK):
    assert st == want, lib.swa_last_error().decode()


def hf_config():
    return DeepseekV4Config(
        hidden_size=HIDDEN, head_dim=D, index_head_dim=DI, num_attention_heads=2,
        num_key_value_heads=1, q_lora_rank=16, index_n_heads=2, index_topk=4,
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        partial_rotary_factor=ROPE / D, num_hidden_layers=2, vocab_size=64, sliding_window=8,
        rms_norm_eps=1e-6)


def init_module(mod, gen):
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * 0.7)
        for name, p in mod.named_parameters():
            if "kv_norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))


class FakeCache:
    def __init__(self, layer):
        self.layers = [layer]


def hf_entries(cfg, kind, comp, hidden, bf16_rows):
    """Entries of the accepted sequence, fed one token per call through the
    transformers cache: {"main": [W, D], "indexer": [W, DI]}."""
    layer = (hf.DeepseekV4HCACache if kind == HCA else hf.DeepseekV4CSACache)(cfg)
    cache = FakeCache(layer)
    if bf16_rows:  # transformers keeps rows in the activation dtype: round kv and gate
        for m in [comp] + ([comp.indexer] if kind == CSA else []):
            for proj in (m.kv_proj, m.gate_proj):
                proj.register_forward_hook(lambda _m, _i, o: o.to(torch.bfloat16).float())
    with torch.no_grad():
        for p in range(hidden.shape[1]):
            h = hidden[:, p:p + 1]
            q_res = torch.zeros(1, 1, 16)
            comp(h, q_res, torch.tensor([[p]]), cache, 0)
    out = {"main": layer.compressed_kv["compressor"][0].numpy()}
    if kind == CSA:
        out["indexer"] = layer.compressed_kv["indexer"][0].numpy()
    return out


def rows_of(m, hidden):
    with torch.no_grad():
        return (m.kv_proj(hidden)[0].numpy().astype(np.float32),
                m.gate_proj(hidden)[0].numpy().astype(np.float32))


class LibRun:
    def __init__(self, lib, kind, rate, bf16_rows, ring_len=4 + N + 1):
        self.lib, self.kind, self.rate = lib, kind, rate
        d = LayerDesc()
        lib.swa_layer_desc_init(ctypes.byref(d))
        d.q_heads, d.head_dim, d.kv_format = 2, 32, FP32
        d.compress_kind, d.compress_ratio, d.compress_head_dim = kind, rate, D
        d.compress_rope_dims, d.rope_theta = ROPE, 160000.0
        d.compress_row_format = BF16_FMT if bf16_rows else FP32
        d.index_head_dim = DI if kind == CSA else 0
        self.desc = d
        cfg = Config()
        lib.swa_config_init(ctypes.byref(cfg))
        cfg.window, cfg.draft_tokens, cfg.max_slots = 4, N, 2
        cfg.backend, cfg.num_threads, cfg.num_layers = CPU, 1, 1
        cfg.ring_len = ring_len  # W + N + 1 by default: staged steps for long chunks
        cfg.layers = ctypes.addressof(d)
        self.cache = ctypes.c_void_p()
        check(lib, lib.swa_cache_create(ctypes.byref(cfg), ctypes.byref(self.cache)))
        self.plan = ctypes.c_void_p()
        check(lib, lib.swa_plan_create(self.cache, ctypes.byref(self.plan)))
        self.slot = ctypes.c_uint32()
        check(lib, lib.swa_slot_alloc(self.cache, ctypes.byref(self.slot)))

    def close(self):
        self.lib.swa_plan_destroy(self.plan)
        self.lib.swa_cache_destroy(self.cache)

    def step(self, q_start, rows, weights):
        """rows: {"main": (kv, gate), "indexer": ...} for positions q_start ...;
        returns (windows, {name: entries})."""
        lib = self.lib
        t = rows["main"][0].shape[0]
        seq = Seq(self.slot.value, t, q_start + t, 0)
        check(lib, lib.swa_plan_build(self.plan, ctypes.byref(seq), 1))
        n = ctypes.c_size_t()
        check(lib, lib.swa_plan_compress_windows(self.plan, 0, None, 0, ctypes.byref(n)))
        wins = (Window * max(n.value, 1))()
        check(lib, lib.swa_plan_compress_windows(self.plan, 0, wins, n.value, ctypes.byref(n)))
        out = {}
        for ci, name in enumerate(rows):
            kv, gate = (np.ascontiguousarray(a, np.float32) for a in rows[name])
            bias, weight, dim = weights[name]
            res = np.full((max(n.value, 1), dim), np.nan, np.float32)
            a = Args()
            lib.swa_compress_args_init(ctypes.byref(a))
            a.layer, a.compressor = 0, ci
            a.kv, a.gate = kv.ctypes.data, gate.ctypes.data
            a.row_width, a.rows = kv.shape[1], t
            a.position_bias, a.norm_weight = bias.ctypes.data, weight.ctypes.data
            a.out, a.out_rows = res.ctypes.data, n.value
            check(lib, lib.swa_compress_step(self.cache, self.plan, ctypes.byref(a)))
            out[name] = res[:n.value]
        return [wins[i].entry for i in range(n.value)], out


def weights_of(comp, kind):
    w = {"main": (comp.position_bias.detach().numpy().astype(np.float32).copy(),
                  comp.kv_norm.weight.detach().numpy().astype(np.float32).copy(), D)}
    if kind == CSA:
        ix = comp.indexer
        w["indexer"] = (ix.position_bias.detach().numpy().astype(np.float32).copy(),
                        ix.kv_norm.weight.detach().numpy().astype(np.float32).copy(), DI)
    return w


def close(got, ref):
    return np.all(np.abs(got - ref) <= 2e-6 + 2e-6 * np.abs(ref))


@pytest.mark.parametrize("bf16_rows", [False, True])
@pytest.mark.parametrize("kind", [HCA, CSA])
def test_against_transformers(lib, kind, bf16_rows):
    cfg = hf_config()
    gen = torch.Generator().manual_seed(31 + kind + 2 * bf16_rows)
    comp = (hf.DeepseekV4HCACompressor if kind == HCA else hf.DeepseekV4CSACompressor)(cfg)
    init_module(comp, gen)
    rate = comp.compress_rate
    P = 6 * rate + 5
    hidden = torch.randn(1, P, HIDDEN, generator=gen)
    ref = hf_entries(cfg, kind, comp, hidden, bf16_rows)
    assert ref["main"].shape[0] == P // rate
    mods = {"main": comp}
    if kind == CSA:
        mods["indexer"] = comp.indexer
    rows = {k: rows_of(m, hidden) for k, m in mods.items()}
    weights = weights_of(comp, kind)
    rng = np.random.default_rng(7 + kind)
    max_chunk = 2 * rate + N + 1
    # Every chunk size and every draft count, cycled over the sequence.
    schedule = [(k, dr) for k in range(1, max_chunk + 1) for dr in range(N + 1)]
    rng.shuffle(schedule)
    run = LibRun(lib, kind, rate, bf16_rows)
    try:
        final = {k: {} for k in mods}
        pos, i = 0, 0
        while pos < P:
            k, drafts = schedule[i % len(schedule)]
            i += 1
            k = min(k, P - pos)
            step_rows = {}
            for name in mods:
                kv, gate = rows[name]
                junk = rng.standard_normal((drafts, kv.shape[1])).astype(np.float32) * 3
                step_rows[name] = (np.concatenate([kv[pos:pos + k], junk]),
                                   np.concatenate([gate[pos:pos + k], junk[::-1]]))
            entries, out = run.step(pos, step_rows, weights)
            for j, w in enumerate(entries):
                window_end = (w + 1) * rate  # one past the window's last position
                for name in mods:
                    final[name][w] = out[name][j]
                    if window_end <= pos + k:  # accepted positions only: equal transformers
                        assert close(out[name][j], ref[name][w]), (name, w, out[name][j],
                                                                    ref[name][w])
            pos += k  # the drafts are rejected: the next step starts at the first one
        for name in mods:
            assert sorted(final[name]) == list(range(P // rate))
            for w in range(P // rate):
                assert close(final[name][w], ref[name][w]), (name, w)
    finally:
        run.close()


def test_rewind_beyond_the_ring_is_refused(lib):
    run = LibRun(lib, HCA, 8, False, ring_len=64)  # the SWA ring allows the rewind
    try:
        d = {"main": (np.ones((20, D), np.float32), np.ones((20, D), np.float32))}
        w = {"main": (np.zeros((8, D), np.float32), np.ones(D, np.float32), D)}
        run.step(0, d, w)
        seq = Seq(run.slot.value, 1, 10, 0)  # q_start 9: entry 1 starts at 8 < 20 - 10
        check(lib, lib.swa_plan_build(run.plan, ctypes.byref(seq), 1), FAILED_PRECONDITION)
        assert b"compressor ring" in lib.swa_last_error()
    finally:
        run.close()
