"""A built-in store is handed over once, also when threads race for it: two
threads attaching one MemoryStore to two caches (or one making it a tier while
another attaches it, or closes it) must leave exactly one owner. Before the
fix both passed the ownership check while the GIL was released in
swa_cache_set_store, and the two owners released the table twice (SIGSEGV at
close). The races run in a child process so that a regression kills the child,
not the suite."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import swacache as sc
from helpers import layer

_CHILD = textwrap.dedent("""
    import sys, threading
    import swacache as sc
    sys.path.insert(0, {tests!r})
    from helpers import layer

    def race(mode):
        m = sc.MemoryStore()
        caches = [sc.Cache(window=8, max_slots=2, layers=[layer()]) for _ in range(2)]
        bar = threading.Barrier(2)
        owners, tiered = [], []

        def attach(c):
            bar.wait()
            try:
                c.set_store(m)
                owners.append(c)
            except sc.FailedPreconditionError:
                pass

        def make_tier():
            bar.wait()
            try:
                tiered.append(sc.TieredStore([m]))
                owners.append("tiered")
            except sc.FailedPreconditionError:
                pass

        def close():
            bar.wait()
            m.close()

        second = {{"caches": lambda: attach(caches[1]), "tier": make_tier,
                  "close": close}}[mode]
        ts = [threading.Thread(target=attach, args=(caches[0],)),
              threading.Thread(target=second)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(owners) <= 1 and (len(owners) == 1 or mode == "close"), (mode, owners)
        for c in caches:
            c.close()
        for t in tiered:
            t.close()

    for mode in ("caches", "tier", "close"):
        for _ in range(300):
            race(mode)
    print("ok")
""")


def test_threads_racing_for_one_builtin_store_leave_one_owner():
    tests = str(pathlib.Path(__file__).parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(sc.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD.format(tests=tests)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)


def test_the_same_builtin_store_twice_in_one_tiered_store_is_refused_and_stays_usable():
    m = sc.MemoryStore()
    with pytest.raises(sc.InvalidArgumentError, match=r"tiers\[1\].*twice"):
        sc.TieredStore([m, m])
    assert m.state == "owned"
    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        c.set_store(m)
        assert m.state == "attached"


def test_a_failed_tiered_store_gives_its_builtin_tiers_back():
    m = sc.MemoryStore()
    with pytest.raises(sc.InvalidArgumentError, match=r"tiers\[1\]"):
        sc.TieredStore([m, 42])
    assert m.state == "owned"
    m.close()
    assert m.state == "released"


def test_an_interrupted_hand_over_gives_the_store_back(monkeypatch):
    # A KeyboardInterrupt (any non-Error exception) in the attach left the
    # store "handing over" for ever: neither attachable nor closable (a leak).
    import swacache._cache as cache_mod

    real = cache_mod._lib

    class Interrupting:
        def __getattr__(self, n):
            return getattr(real, n)

        def swa_cache_set_store(self, *a):
            raise KeyboardInterrupt

    m = sc.MemoryStore()
    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        monkeypatch.setattr(cache_mod, "_lib", Interrupting())
        with pytest.raises(KeyboardInterrupt):
            c.set_store(m)
        monkeypatch.setattr(cache_mod, "_lib", real)
        assert m.state == "owned"
        c.set_store(m)
        assert m.state == "attached"
