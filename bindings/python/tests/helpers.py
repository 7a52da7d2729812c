"""Shared helpers: a NumPy reference of windowed attention."""

import numpy as np

import swacache as sc


def layer(**kw):
    base = dict(q_heads=4, kv_heads=2, head_dim=32, shared_kv=False, kv_format=sc.Format.FP32)
    base.update(kw)
    return sc.Layer(**base)


def ref_attention(q, keys, vals, positions_q, positions_k, window, scale, sinks=None,
                  valid_start=0):
    """q [T, Hq, D]; keys/vals [S, Hkv, D] at positions_k; causal window of W keys."""
    T, Hq, D = q.shape
    Hkv = keys.shape[1]
    g = Hq // Hkv
    out = np.zeros((T, Hq, D), np.float64)
    lse = np.zeros((T, Hq), np.float64)
    for t in range(T):
        p = positions_q[t]
        sel = [i for i, pk in enumerate(positions_k)
               if p - window < pk <= p and pk >= valid_start]
        for h in range(Hq):
            kk = keys[sel, h // g].astype(np.float64)
            vv = vals[sel, h // g].astype(np.float64)
            s = kk @ q[t, h].astype(np.float64) * scale
            cols = list(s) + ([float(sinks[h])] if sinks is not None else [])
            m = max(cols)
            e = np.exp(np.array(cols) - m)
            den = e.sum()
            out[t, h] = (e[: len(sel)] @ vv) / den if sel else 0.0
            lse[t, h] = m + np.log(den)
    return out, lse
