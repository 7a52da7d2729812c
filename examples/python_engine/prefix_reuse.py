"""Shared-prefix workload: the three prefix-reuse policies of issue 32, measured.

Requests share long prefixes (a system prompt, then a conversation that grows by a
turn per request, each prompt holding the previous answers). The engine runs them one
after another on the tiny gpt-oss model of engine.py and a tiny Gemma-2 (gemma2.py;
FP32 KV, CPU) under these policies, each in a fresh cache and store:

- none: no reuse; every prompt is prefilled from position 0.
- checkpoint: while prefilling (in chunks of CHUNK tokens, which do not end on the
  interval) and decoding, the engine saves the slot's SWA state at every multiple c of K
  (swa_slot_save_at, keys = a hash of the first c tokens) into a memory store. A new
  request probes its candidate keys, longest first (swa_cache_store_probe), restores
  the longest checkpoint and prefills the tail. Token-exact against generate (asserted).
- exact replay: no SWA state stored. The full layers' KV is cached in blocks of BLOCK
  tokens (a paged prefix cache); a request hitting h cached positions re-runs the exact
  span L x (W - 1) below h (swa_slot_begin_replay_exact), the full layers reading their
  cached KV (never overwriting it), then prefills the tail. Token-exact (asserted).
- approximate replay: as exact replay but over the last W positions
  (swa_slot_begin_replay). Token agreement and logit error are reported, not asserted.
- exact replay, S - 1: the control. The exact span less one position; its logits must
  differ from a full forward pass by more than the 1e-4 the exact policies are held to
  (asserted), so that the exactness check is shown able to fail.

Printed per policy: positions computed (and how many of them re-computed prefix
positions), bytes stored (SWA checkpoints; the full layers' block cache), and the mean
time per request: to the first token (admission and prefill) and in all (with
MAX_NEW - 1 decode steps, the same under every policy). docs/engine-guide.md shows the table.
Run: python prefix_reuse.py [--model gpt-oss|gemma-2|all] (ci.sh runs it against the
build's library).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch

import swacache as sc
from engine import W, GptOssAdapter, rope_neox, sink_attention, tiny_gpt_oss
from gemma2 import Gemma2Adapter, tiny_gemma2

K = 32  # checkpoint interval (tokens)
CHUNK = 24  # prefill chunk: does not divide K, so checkpoints fall inside chunks
BLOCK = 16  # the full layers' prefix-cache block
RING = W - 1 + CHUNK  # R: a checkpoint may lag the sequence by up to R - W + 1 = CHUNK
MAX_NEW = 8
POLICIES = ["none", "checkpoint", "exact replay", "approx replay", "exact replay, S - 1"]


def key_of(kind: str, tokens: List[int]) -> bytes:
    return kind.encode() + b":" + hashlib.sha256(
        b"".join(t.to_bytes(4, "little") for t in tokens)).hexdigest().encode()


class Req:
    def __init__(self, rid: str, prompt: List[int]) -> None:
        self.rid, self.prompt = rid, prompt
        self.tokens: List[int] = list(prompt)
        self.generated: List[int] = []
        self.state: Dict[str, torch.Tensor] = {}  # engine-side per-request KV (full layers)
        self.logits: Dict[int, torch.Tensor] = {}
        self.slot: Optional[int] = None
        self.n_done = 0
        self.hit = 0  # prefix positions not prefilled by this request
        self.replayed = 0  # prefix positions re-computed by a replay
        self.computed = 0  # positions run through the model
        self.first_token_s = 0.0  # admission (probe, restore or replay) + prefill


class Adapter(GptOssAdapter):
    """engine.py's gpt-oss adapter; during a replay the full layers attend over the
    request's cached KV of the prefix instead of writing what the replay recomputed
    (the exact replay's condition on the full layers, docs/semantics.md)."""

    read_cached = False

    def _full_attention(self, batch, li, q, k, v, cos, sin, attn):
        if not self.read_cached:
            return super()._full_attention(batch, li, q, k, v, cos, sin, attn)
        (r, start, toks), = batch
        q = rope_neox(q, cos, sin)
        kk, vv = r.state[f"k{li}"], r.state[f"v{li}"]
        end = start + len(toks)
        assert kk.shape[0] >= end
        return sink_attention(q, kk[:end], vv[:end], start, attn.sinks, attn.scaling)


MODELS = {"gpt-oss": (tiny_gpt_oss, Adapter), "gemma-2": (tiny_gemma2, Gemma2Adapter)}


class PrefixEngine:
    def __init__(self, model, make_adapter, policy: str) -> None:
        self.policy = policy
        self.adapter = make_adapter(model)
        self.full_layers = [i for i in range(model.config.num_hidden_layers)
                            if i not in self.adapter.swa_id]
        self.cache = sc.Cache(window=W, ring_len=RING, max_slots=2, num_threads=1,
                              layers=self.adapter.layer_descs(sc.Format.FP32))
        self.store = sc.MemoryStore()
        self.cache.set_store(self.store)
        self.plan = self.cache.plan()
        self.blocks: Dict[bytes, Dict[str, torch.Tensor]] = {}  # full-layer KV per block
        self.saved = set()  # checkpoint keys written (a cheap local index; the store decides)

    def close(self) -> None:
        self.plan.close()
        self.cache.close()

    @torch.no_grad()
    def forward(self, r: Req, start: int, toks: List[int]) -> torch.Tensor:
        self.plan.build([sc.Seq(r.slot, len(toks), start + len(toks))])
        r.computed += len(toks)
        return self.adapter.forward(self, [(r, start, toks)])

    # ---- reuse --------------------------------------------------------------------
    def _full_kv_hit(self, r: Req) -> int:
        """Longest run of cached full-layer blocks, leaving >= 1 prompt token to run."""
        n = 0
        while (n + 1) * BLOCK <= len(r.prompt) - 1 and \
                key_of("kv", r.prompt[:(n + 1) * BLOCK]) in self.blocks:
            n += 1
        return n * BLOCK

    def _load_full_kv(self, r: Req, h: int) -> None:
        parts = [self.blocks[key_of("kv", r.prompt[:(i + 1) * BLOCK])] for i in range(h // BLOCK)]
        for li in self.full_layers:
            for kv in ("k", "v"):
                r.state[f"{kv}{li}"] = torch.cat([p[f"{kv}{li}"] for p in parts])

    def admit(self, r: Req) -> None:
        r.slot = self.cache.alloc()
        if self.policy == "checkpoint":
            cands = list(range(K * ((len(r.prompt) - 1) // K), 0, -K))
            i = self.cache.store_probe([key_of("ckpt", r.prompt[:c]) for c in cands]) \
                if cands else -1
            if i >= 0:
                c = cands[i]
                self.cache.restore(r.slot, key_of("ckpt", r.prompt[:c]))
                assert self.cache.slot_info(r.slot).written_end == c
                assert self._full_kv_hit(r) >= c  # the block cache holds the full layers' KV
                self._load_full_kv(r, c)
                r.hit = r.n_done = c
        elif self.policy != "none":
            h = self._full_kv_hit(r)
            if h > 0:
                self._load_full_kv(r, h)
                if self.policy == "approx replay":
                    start, n = self.cache.begin_replay(r.slot, h)
                else:
                    start, n = self.cache.begin_replay_exact(r.slot, h)
                    if self.policy == "exact replay, S - 1":  # the control: one position short
                        start, n = start + 1, n - 1
                        self.cache.set_valid_start(r.slot, start)
                self.adapter.read_cached = True
                try:
                    self.forward(r, start, r.prompt[start:h])  # outputs discarded
                finally:
                    self.adapter.read_cached = False
                r.hit = r.n_done = h
                r.replayed = n

    # ---- checkpoints and the block cache ---------------------------------------------
    def _checkpoint(self, r: Req, before: int) -> None:
        if self.policy != "checkpoint":
            return
        for c in range(K * (before // K + 1), r.n_done + 1, K):
            key = key_of("ckpt", r.tokens[:c])
            if key in self.saved:
                continue
            lo, hi = self.cache.checkpoint_range(r.slot)
            assert lo <= c <= hi, (c, lo, hi)
            self.cache.save_at(r.slot, c, key)
            self.saved.add(key)

    def _publish_blocks(self, r: Req) -> None:
        if self.policy == "none":
            return
        for i in range(r.n_done // BLOCK):
            key = key_of("kv", r.tokens[:(i + 1) * BLOCK])
            if key not in self.blocks:
                self.blocks[key] = {f"{kv}{li}": r.state[f"{kv}{li}"][i * BLOCK:(i + 1) * BLOCK]
                                    .clone() for li in self.full_layers for kv in ("k", "v")}

    def block_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for b in self.blocks.values() for t in b.values())

    # ---- one request ------------------------------------------------------------------
    def run(self, r: Req) -> None:
        t0 = time.perf_counter()
        self.admit(r)
        while r.n_done < len(r.prompt):
            toks = r.prompt[r.n_done:r.n_done + CHUNK]
            lg = self.forward(r, r.n_done, toks)
            for i in range(len(toks)):
                r.logits[r.n_done + i] = lg[i].clone()
            before, r.n_done = r.n_done, r.n_done + len(toks)
            self._checkpoint(r, before)
        r.generated.append(int(r.logits[r.n_done - 1].argmax()))
        r.tokens.append(r.generated[-1])
        r.first_token_s = time.perf_counter() - t0
        while len(r.generated) < MAX_NEW:
            lg = self.forward(r, r.n_done, [r.tokens[-1]])
            r.logits[r.n_done] = lg[0].clone()
            r.n_done += 1
            self._checkpoint(r, r.n_done - 1)
            r.generated.append(int(lg[0].argmax()))
            r.tokens.append(r.generated[-1])
        self._publish_blocks(r)
        self.cache.free(r.slot)


def workload(model) -> List[Tuple[str, List[int], List[int]]]:
    """(rid, prompt head, turn text): a system prompt, then turns; each request's prompt
    is the previous request's prompt + its answer + a new turn (the answers are the
    model's own greedy tokens, filled in by references())."""
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(7)
    rnd = lambda n: torch.randint(1, V, (n,), generator=g).tolist()  # noqa: E731
    system = rnd(70)
    return [("t1", system, rnd(13)), ("t2", None, rnd(11)), ("t3", None, rnd(17)),
            ("t4", None, rnd(9)), ("u1", system, rnd(21)), ("u2", None, rnd(5))]


@torch.no_grad()
def references(model, spec) -> List[Tuple[str, List[int], List[int]]]:
    """Prompts and generate()'s greedy continuations (the reference)."""
    out, prev = [], None
    for rid, head, turn in spec:
        prompt = (list(head) if head is not None else prev[0] + prev[1]) + turn
        gen = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_NEW, do_sample=False,
                             pad_token_id=0)[0, len(prompt):].tolist()
        out.append((rid, prompt, gen))
        prev = (prompt, gen)
    return out


@torch.no_grad()
def run_policy(model, make_adapter, refs, policy: str) -> dict:
    eng = PrefixEngine(model, make_adapter, policy)
    reqs, times = [], []
    try:
        for rid, prompt, _ in refs:
            r = Req(rid, prompt)
            t0 = time.perf_counter()
            eng.run(r)
            times.append(time.perf_counter() - t0)
            reqs.append(r)
        st = eng.store.stats()
        swa_bytes, swa_blobs = st.bytes, st.entries
        blk_bytes = eng.block_bytes()
    finally:
        eng.close()
    agree = total = 0
    worst = 0.0
    exact = True
    for r, (_, prompt, gen) in zip(reqs, refs):
        full = torch.tensor([prompt + r.generated[:-1]])
        ref = model(full).logits[0]
        err = max(float((r.logits[p] - ref[p]).abs().max()) for p in r.logits)
        worst = max(worst, err)
        agree += sum(a == b for a, b in zip(r.generated, gen))
        total += len(gen)
        exact &= r.generated == gen
    return dict(policy=policy, reqs=reqs, prefilled=sum(len(r.prompt) - r.hit for r in reqs),
                replayed=sum(r.replayed for r in reqs), computed=sum(r.computed for r in reqs),
                hits=[r.hit for r in reqs], swa_bytes=swa_bytes, swa_blobs=swa_blobs, block_bytes=blk_bytes,
                ms=1e3 * sum(times) / len(times), tokens_equal=exact,
                ttft_ms=1e3 * sum(r.first_token_s for r in reqs) / len(reqs),
                agreement=f"{agree}/{total}", max_err=worst)


def run_model(kind: str) -> bool:
    make_model, make_adapter = MODELS[kind]
    model = make_model()
    refs = references(model, workload(model))
    prompt_tokens = sum(len(p) for _, p, _ in refs)
    n_sliding = len(make_adapter(model).swa_id)
    n_full = model.config.num_hidden_layers - n_sliding
    print(f"== {kind} (tiny, FP32 KV): W = {W}, {n_sliding} sliding + {n_full} full layers, "
          f"{len(refs)} requests, {prompt_tokens} prompt tokens, {MAX_NEW} generated each; "
          f"checkpoint every K = {K}, prefill chunk {CHUNK}, R = {RING}, full-layer KV blocks "
          f"of {BLOCK}")
    print("prompt lengths: " + ", ".join(f"{rid} {len(p)}" for rid, p, _ in refs))
    rows = [run_policy(model, make_adapter, refs, p) for p in POLICIES]
    print("| policy | prefix hits (positions) | prompt positions prefilled | prefix positions "
          "re-computed | positions computed | SWA checkpoints stored (bytes) | full-layer KV "
          "bytes cached | ms to first token | ms per request | tokens equal to generate | "
          "max logit error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['policy']} | {' '.join(map(str, x['hits']))} | {x['prefilled']} | "
              f"{x['replayed']} | {x['computed']} | {x['swa_blobs']} ({x['swa_bytes']:,}) | "
              f"{x['block_bytes']:,} | {x['ttft_ms']:.1f} | {x['ms']:.1f} | {x['agreement']} | "
              f"{x['max_err']:.2g} |")
    ok = True
    for x in rows:
        if x["policy"] == "approx replay":
            continue  # reported, not asserted
        if x["policy"] == "exact replay, S - 1":
            good = x["max_err"] > 1e-4
            print(f"  {x['policy']}: logits differ by more than 1e-4 (the check can fail): "
                  f"{'OK' if good else 'FAILED'}")
            ok &= good
            continue
        good = x["tokens_equal"] and x["max_err"] <= 1e-4
        print(f"  {x['policy']}: tokens identical to generate and logits within 1e-4: "
              f"{'OK' if good else 'FAILED'}")
        ok &= good
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="all", choices=list(MODELS) + ["all"])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    ok = True
    for kind in (list(MODELS) if args.model == "all" else [args.model]):
        ok &= run_model(kind)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
