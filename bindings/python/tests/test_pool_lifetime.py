"""A caller-provided pool (Config.pool) lives as long as the library's cache
handle, not as long as the Cache object: ring() arrays pin the handle and view
the pool. Before the fix only the Cache object (through its config) held the
pool, so a ring array that outlived the Cache (or a cache whose config.pool was
reassigned) read freed memory: SIGSEGV once NumPy had returned the pool's pages.
The checks run in a child process so that a regression kills the child only."""

import os
import pathlib
import subprocess
import sys
import textwrap

import swacache as sc

_CHILD = textwrap.dedent("""
    import gc, sys
    import numpy as np
    import swacache as sc
    sys.path.insert(0, {tests!r})
    from helpers import layer

    def caller_pool(cfg):
        lay = sc.layout_compute(cfg)
        raw = np.zeros(lay.pool_bytes + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        return raw[off:off + lay.pool_bytes]

    def churn():
        # Reuse the freed pages (a 2 MiB NumPy buffer is mmap'd and unmapped).
        return [np.full(4 << 20, 9, np.uint8) for _ in range(4)]

    # 1. A ring array outliving its Cache object (closed or only dropped).
    for close in (True, False):
        cfg = sc.Config(window=64, max_slots=64, layers=[layer()])
        cfg.pool = caller_pool(cfg)
        c = sc.Cache(cfg)
        ring = c.ring(0)
        ring[...] = 7
        if close:
            c.close()
        del c, cfg
        gc.collect()
        junk = churn()
        assert int(ring.sum()) == 7 * ring.size, "ring array reads freed pool memory"
        del ring, junk
        gc.collect()

    # 2. config.pool reassigned while the cache is open.
    cfg = sc.Config(window=64, max_slots=64, layers=[layer()])
    cfg.pool = caller_pool(cfg)
    with sc.Cache(cfg) as c:
        ring = c.ring(0)
        ring[...] = 5
        cfg.pool = None
        gc.collect()
        junk = churn()
        assert int(ring.sum()) == 5 * ring.size
        del ring
    print("ok")
""")


def test_a_caller_pool_outlives_every_view_of_it():
    tests = str(pathlib.Path(__file__).parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(sc.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD.format(tests=tests)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)
