"""What engine.py and its model adapters share: the constants of the run and the
helpers for the engine's plain per-request state."""

from __future__ import annotations

import torch

W = 16  # the checkpoint's sliding_window: libswacache's W
N_DRAFT = 3  # speculative draft tokens per decode step
SEED = 0


def history(r, name: str, start: int, new: torch.Tensor) -> torch.Tensor:
    """Write `new` at positions start... of the request's plain state `name` (dropping
    anything at or above `start`: rejected drafts, replayed tokens) and return it all."""
    old = r.state.get(name)
    r.state[name] = new.clone() if old is None else torch.cat([old[:start], new])
    return r.state[name]


def batch_positions(batch) -> torch.Tensor:
    return torch.cat([torch.arange(s, s + len(toks)) for _, s, toks in batch])
