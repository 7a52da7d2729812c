"""The cache checks step arguments against the layers it was created with, not
against Layer objects the caller changes afterwards. Before the fix the cache
kept the caller's Layer objects: reusing one with a smaller head_dim for
another model made a step pass arrays sized for it, and the library wrote
past them (heap corruption, abort at exit). Runs in a child process so that a
regression kills only the child."""

import os
import pathlib
import subprocess
import sys
import textwrap

import swacache as sc

_CHILD = textwrap.dedent("""
    import numpy as np
    import swacache as sc
    L = sc.Layer(q_heads=4, kv_heads=2, head_dim=128, shared_kv=True, kv_format=sc.Format.FP32)
    c = sc.Cache(window=8, max_slots=2, layers=[L])
    L.head_dim = 32  # the caller reuses its Layer for another model
    c.layers[0].head_dim = 16  # or edits the copy it reads back
    assert c.layers[0].head_dim == 128 and c.layer_layout(0).vec_bytes == 512
    p = c.plan()
    T = 64
    p.build([(int(c.alloc()), T, T)])
    g = np.random.default_rng(0)
    q = g.standard_normal((T, 4, 32)).astype(np.float32)
    k = g.standard_normal((T, 2, 32)).astype(np.float32)
    try:
        p.step(0, q, k)
        raise SystemExit("step accepted arrays sized for head_dim 32 on a head_dim-128 cache")
    except sc.InvalidArgumentError as e:
        assert "(64, 4, 128)" in str(e), e
    out = p.step(0, np.zeros((T, 4, 128), np.float32), np.zeros((T, 2, 128), np.float32))
    assert out.shape == (T, 4, 128)
    c.close()
    print("ok")
""")


def test_steps_check_against_the_layers_the_cache_was_created_with():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(sc.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)
