"""Cache, layout, slots."""

import numpy as np
import pytest

import swacache as sc
from helpers import layer


def make(**kw):
    cfg = dict(window=8, max_slots=4, layers=[layer(), layer(role=sc.LayerRole.DROPPED)])
    cfg.update(kw)
    return sc.Cache(**cfg)


def test_layout_compute_matches_cache():
    cfg = sc.Config(window=8, max_slots=4, layers=[layer(), layer(role=sc.LayerRole.DROPPED)])
    lay = sc.layout_compute(cfg)
    with sc.Cache(cfg) as c:
        assert c.layout == lay
        assert lay.num_layers == 2 and lay.num_stored_layers == 1
        assert lay.ring_len == 9 and lay.pool_bytes == 4 * lay.slot_bytes
        ll = c.layer_layout(0)
        assert ll.heads_per_token == 4 and ll.vec_bytes == 128 and ll.kv_format == sc.Format.FP32
        assert c.layer_layout(1).role == sc.LayerRole.DROPPED
        with pytest.raises(sc.OutOfRangeError):
            c.layer_layout(2)
        v = c.layer_view(0)
        assert v.shape == (4, 9, 4, 128) and v.backend == sc.Backend.CPU and v.device == -1
        ring = c.ring(0)
        assert ring.shape == (4, 9, 4, 128) and ring.dtype == np.uint8
        assert ring.strides == v.strides
        with pytest.raises(sc.OutOfRangeError):
            c.layer_view(5)
        st = c.stats()
        assert st.max_slots == 4 and st.slots_in_use == 0 and st.pool_bytes == lay.pool_bytes


def test_layout_compute_rejects_bad_config():
    with pytest.raises(sc.InvalidArgumentError, match="window"):
        sc.layout_compute(sc.Config(window=0, layers=[layer()]))


def test_config_errors_name_the_field():
    with pytest.raises(sc.InvalidArgumentError, match="Config.window"):
        sc.Cache(window=-1, layers=[layer()])
    with pytest.raises(sc.InvalidArgumentError, match="Config.layers\\[0\\]"):
        sc.Cache(window=8, layers=["not a layer"])
    with pytest.raises(sc.InvalidArgumentError, match="Layer.q_heads"):
        sc.Cache(window=8, layers=[layer(q_heads="x")])
    with pytest.raises(sc.InvalidArgumentError):
        sc.Cache(sc.Config(layers=[layer()]), window=4)
    with pytest.raises(sc.InvalidArgumentError):  # the library's check
        sc.Cache(window=8, layers=[layer(q_heads=3)])


def test_cuda_backend_in_a_cpu_build_or_without_device():
    try:
        c = sc.Cache(window=8, layers=[layer()], backend=sc.Backend.CUDA)
    except (sc.UnimplementedError, sc.Error) as e:
        assert e.code in (sc.Status.UNIMPLEMENTED, sc.Status.UNAVAILABLE,
                          sc.Status.INVALID_ARGUMENT, sc.Status.INTERNAL)
    else:
        assert c.backend == sc.Backend.CUDA
        c.close()


def test_caller_pool():
    cfg = sc.Config(window=8, max_slots=2, layers=[layer()])
    lay = sc.layout_compute(cfg)
    raw = np.zeros(lay.pool_bytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    pool = raw[off:off + lay.pool_bytes]
    cfg.pool = pool
    with sc.Cache(cfg) as c:
        assert c.layer_view(0).data == pool.ctypes.data
    cfg.pool = raw[off:off + 32]
    with pytest.raises(sc.InvalidArgumentError):
        sc.Cache(cfg)


def test_close_is_idempotent_and_closed_calls_raise():
    c = make()
    p = c.plan()
    c.close()
    c.close()
    assert c.closed
    for call in (c.alloc, c.stats, lambda: c.layer_layout(0), lambda: c.set_store(None),
                 lambda: c.save(0, b"k"), p.info, lambda: c.plan()):
        with pytest.raises(sc.ClosedError):
            call()
    with make() as c2:
        assert not c2.closed
    assert c2.closed


def test_slots():
    with make() as c:
        slots = [c.alloc() for _ in range(4)]
        assert sorted(int(s) for s in slots) == [0, 1, 2, 3]
        with pytest.raises(sc.ResourceExhaustedError):
            c.alloc()
        assert c.stats().slots_in_use == 4
        s = slots[0]
        info = s.info()
        assert info.allocated and info.written_end == 0 and info.valid_start == 0
        assert info.byte_offset == int(s) * c.layout.slot_bytes
        s.free()
        assert not c.slot_info(s).allocated
        with pytest.raises(sc.FailedPreconditionError):
            c.free(s)
        with pytest.raises(sc.OutOfRangeError):
            c.free(99)
        with pytest.raises(sc.InvalidArgumentError, match="slot"):
            c.free(-1)
        with pytest.raises(sc.OutOfRangeError):
            c.slot_info(99)
        with pytest.raises(sc.FailedPreconditionError):
            c.reset(s)
        with pytest.raises(sc.FailedPreconditionError):
            c.copy_slot(s, slots[1])
        with pytest.raises(sc.OutOfRangeError):
            c.reset(1000)


def test_valid_start_and_replay():
    with make() as c:
        s = c.alloc()
        s.set_valid_start(5)
        assert s.info().valid_start == 5
        with pytest.raises(sc.FailedPreconditionError):
            s.set_valid_start(3)
        with pytest.raises(sc.InvalidArgumentError):
            s.set_valid_start(-1)
        s.reset()
        assert s.begin_replay(20) == (12, 8)
        i = s.info()
        assert i.valid_start == 12 and i.written_end == 12
        with pytest.raises(sc.InvalidArgumentError):
            s.begin_replay(-1)
        t = c.alloc()
        with c.plan() as p:
            p.build([(t, 4, 4)])
            p.step(0, *_qkv(4)); p.step(1, *_qkv(4))
        with pytest.raises(sc.FailedPreconditionError):
            t.begin_replay(10)
        with pytest.raises(sc.OutOfRangeError):
            c.set_valid_start(77, 1)


def _qkv(T, hq=4, hkv=2, d=32, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal((T, hq, d)).astype(np.float32),
            r.standard_normal((T, hkv, d)).astype(np.float32),
            r.standard_normal((T, hkv, d)).astype(np.float32))


def test_copy_slot_forks_the_state():
    with make() as c:
        a, b = c.alloc(), c.alloc()
        with c.plan() as p:
            p.build([(a, 5, 5)])
            for l in range(2):
                p.step(l, *_qkv(5))
        a.copy_to(b)
        assert b.info().written_end == 5
        ring = c.ring(0)
        np.testing.assert_array_equal(ring[int(a)], ring[int(b)])
        c.copy_slot(a, a)
