"""close() racing the creation of a plan on another thread: the new plan must be
closed with the cache (destroyed before it), never left undestroyed."""

import threading

import pytest

import swacache as sc
import swacache._plan as plan_mod
from helpers import layer


class _ClosingSet(set):
    """The cache's plan registry, closing the cache from another thread just
    before the plan is registered: the moment after swa_plan_create."""

    def __init__(self, cache):
        super().__init__()
        self.cache = cache
        self.close_returned = None

    def add(self, item):
        t = threading.Thread(target=self.cache.close)
        t.start()
        t.join(0.5)
        self.close_returned = not t.is_alive()
        super().add(item)
        self.thread = t


def test_a_plan_created_while_the_cache_closes_is_destroyed_with_it(monkeypatch):
    destroyed = []
    real = plan_mod._lib

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def swa_plan_destroy(self, h):
            destroyed.append(h)
            real.swa_plan_destroy(h)

    monkeypatch.setattr(plan_mod, "_lib", Spy())
    c = sc.Cache(window=8, max_slots=2, layers=[layer()])
    reg = _ClosingSet(c)
    c._plans = reg
    p = c.plan()
    reg.thread.join(10)
    assert not reg.thread.is_alive()
    # The close waited for the plan's creation and then closed the plan first.
    assert reg.close_returned is False
    assert c.closed
    h = p._handle
    assert h is None and len(destroyed) == 1
    with pytest.raises(sc.ClosedError):
        p.build([(0, 1, 1)])
    p.close()
    assert len(destroyed) == 1



def test_plans_in_a_reference_cycle_with_their_cache_are_destroyed(monkeypatch):
    # Cyclic garbage: the cache, its plans and an object holding both. The
    # garbage collector clears weak references before any __del__ runs, so a
    # cache that found its plans through weak references closed none of them,
    # and each Plan's __del__ then skipped its plan of a closed cache: every
    # plan leaked. The cache now holds the plans' handles strongly.
    import gc

    destroyed = []
    real = plan_mod._lib

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def swa_plan_destroy(self, h):
            destroyed.append(h)
            real.swa_plan_destroy(h)

    monkeypatch.setattr(plan_mod, "_lib", Spy())

    class Engine:
        pass

    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(5):
            e = Engine()
            e.cache = sc.Cache(window=8, max_slots=2, layers=[layer()])
            e.plans = [e.cache.plan() for _ in range(3)]
            e.me = e
            del e
            gc.collect()
    finally:
        if was:
            gc.enable()
    assert len(destroyed) == 15
