"""Integer arguments that C takes as uint32/int32/uint64 (issue: bindings bug
hunt): a value past the C type's range, a negative one where C is unsigned, a
float or a string is refused with InvalidArgumentError naming the argument and
the value, instead of being truncated by ctypes (2**32 + 2 became 2) or by
int() (slot 1.7 became slot 1)."""

import numpy as np
import pytest

import swacache as sc
from helpers import layer


@pytest.mark.parametrize("field,value,shown", [
    ("kv_heads", 2**32 + 2, "4294967298"),
    ("q_heads", -4, "-4"),
    ("rope_yarn_original_max_positions", 2**32 + 4096, "4294971392"),
    ("head_dim", 32.9, "32.9"),
    ("head_dim", "32", "'32'"),
])
def test_layer_fields_out_of_range_are_refused_not_truncated(field, value, shown):
    with pytest.raises(sc.InvalidArgumentError) as e:
        sc.Cache(window=8, max_slots=2, layers=[layer(**{field: value})])
    assert f"Layer.{field}" in str(e.value) and shown in str(e.value)


def test_config_enum_past_int32_is_refused():
    with pytest.raises(sc.InvalidArgumentError, match="Config.backend"):
        sc.Cache(window=8, max_slots=2, layers=[layer()], backend=2**32)


@pytest.mark.parametrize("slot,shown", [(1.7, "1.7"), ("1", "'1'"), (2**32 + 1, "4294967297"),
                                        (-1, "-1")])
def test_a_slot_that_is_not_a_uint32_changes_nothing(slot, shown):
    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        a, b = c.alloc(), c.alloc()
        with pytest.raises(sc.InvalidArgumentError) as e:
            c.free(slot)
        assert "slot" in str(e.value) and shown in str(e.value)
        assert c.slot_info(a).allocated and c.slot_info(b).allocated


def test_numpy_integers_and_bools_still_pass():
    with sc.Cache(window=np.int64(8), max_slots=np.uint32(2),
                  layers=[layer(q_heads=np.int32(4), has_sinks=False)]) as c:
        s = c.alloc()
        c.free(np.int64(int(s)))
        assert not c.slot_info(int(s)).allocated


def test_memory_store_budget_past_uint64_is_refused():
    for bad, shown in ((2**64 + 5, str(2**64 + 5)), (1.5, "1.5"), (-1, "-1")):
        with pytest.raises(sc.InvalidArgumentError) as e:
            sc.MemoryStore(budget_bytes=bad)
        assert "budget_bytes" in str(e.value) and shown in str(e.value)


@pytest.mark.parametrize("call", [
    lambda x: sc.encode(sc.Format.MXFP8, x, 32.5),
    lambda x: sc.mxfp8_encode(x, 32.7),
    lambda x: sc.mxfp8_decode(np.zeros((4, 33), np.uint8), 32.0),
    lambda x: sc.mxfp8_decode(np.zeros((4, 33), np.uint8), -32),
])
def test_codec_dims_are_integers(call):
    # A float dim was truncated (encode of dim 32.5 encoded dim-32 vectors and
    # returned OK) or reached ctypes as a TypeError.
    with pytest.raises(sc.InvalidArgumentError, match="dim"):
        call(np.ones((4, 32), np.float32))


def test_store_probe_refuses_a_single_key_for_the_list():
    # store_probe("ab") probed the keys "a" and "b" and answered for them.
    class S(sc.Store):
        def __init__(self):
            self.asked = []

        def put(self, key, value):
            pass

        def exists(self, key):
            self.asked.append(key)
            return True

    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        st = S()
        c.set_store(st)
        for one in ("ab", b"ab"):
            with pytest.raises(sc.InvalidArgumentError, match="keys: expected a list"):
                c.store_probe(one)
        assert st.asked == []
        assert c.store_probe(["ab"]) == 0 and st.asked[0].endswith(b":ab")
