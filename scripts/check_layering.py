#!/usr/bin/env python3
"""Checks the layering of docs/architecture.md over the #include lines.

Every project include ("dir/file.h") in src/ and kernels/ must point to the
file's own layer or to a layer its row of LAYERS allows. An include that
points up the order, or sideways where the table does not allow it, is
printed as file:line and the exit status is 1.

  check_layering.py [--root DIR]   check the tree at DIR (default: the repo)
  check_layering.py --self-test    plant bad includes in a temporary copy and
                                   check that each one is caught
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

# The one table of allowed dependencies (docs/architecture.md draws it).
# Key: a layer; value: the layers it may include besides itself. A file's
# layer is the longest key that prefixes its path below src/ (or "kernels"
# for kernels/); an include's layer likewise from its quoted path.
# "include" is the public C header: only src/capi/ sees C types.
LAYERS = {
    "common": set(),
    "codec": {"common"},
    "layout": {"common"},
    "kernels": {"common"},
    "backend": {"common", "layout", "backend/cpu", "backend/cuda"},  # the factory picks one
    "backend/cpu": {"common", "codec", "layout", "backend"},
    "backend/cuda": {"common", "codec", "layout", "backend", "kernels"},
    "store": {"common"},
    "cache": {"common", "layout", "backend", "store"},
    "plan": {"common", "layout", "cache"},
    "step": {"common", "layout", "backend", "cache", "plan"},
    "capi": {"common", "codec", "layout", "backend", "store", "cache", "plan", "step",
             "include"},
}

SOURCE_DIRS = ("src", "kernels")
SOURCE_EXT = (".h", ".hh", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".inc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The layer of a path below src/ ("store/x.h") or kernels/ ("kernels/..."),
    or of an include's quoted path; None for what is not the project's."""
    if path == "swacache.h":
        return "include"
    if path.startswith("kernels/"):
        return "kernels"
    best = None
    for layer in LAYERS:
        if layer == "kernels":
            continue
        if path.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


def check(root):
    """Returns the violations under `root` as 'file:line: message' strings."""
    bad = []
    for top in SOURCE_DIRS:
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                own = layer_of(rel[len("src/"):] if top == "src" else rel)
                if own is None:
                    bad.append(f"{rel}:1: file is in no layer of scripts/check_layering.py")
                    continue
                with open(full, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        target = layer_of(m.group(1))
                        if target is None or target == own or target in LAYERS[own]:
                            continue
                        bad.append(f'{rel}:{lineno}: layer {own} includes "{m.group(1)}" '
                                   f"(layer {target}); {own} may include only "
                                   f"{', '.join(sorted(LAYERS[own])) or 'itself'}")
    return bad


def self_test(repo):
    """Copies src/ and kernels/, plants one bad include per kind, and checks
    that the clean copy passes and each planted line is reported."""
    plants = [
        ("src/store/kv_store.h", '#include "cache/cache.h"', "up"),
        ("src/codec/codec.h", '#include "layout/layout.h"', "sideways"),
        ("kernels/attention/attention.h", '#include "backend/backend.h"', "kernels to backend"),
        ("src/plan/step_plan.h", '#include "swacache.h"', "C header outside capi"),
        ("src/common/records.h", '#include "plan/fast_mod.h"', "common to plan"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for top in SOURCE_DIRS:
            shutil.copytree(os.path.join(repo, top), os.path.join(tmp, top))
        clean = check(tmp)
        if clean:
            print("self-test: the unmodified copy already fails:\n  " + "\n  ".join(clean))
            return 1
        for rel, line, kind in plants:
            path = os.path.join(tmp, rel)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.count("\n") + (0 if text.endswith("\n") else 1)
            with open(path, "a", encoding="utf-8") as f:
                f.write(("" if text.endswith("\n") else "\n") + line + "\n")
            want = f"{rel}:{lines + 1}:"
            got = check(tmp)
            if [v for v in got if v.startswith(want)] and len(got) == 1:
                print(f"self-test: caught ({kind}): {got[0]}")
            else:
                print(f"self-test: NOT caught ({kind}): planted {line!r} at {want} got {got}")
                failures += 1
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    # The allowed direction must pass: cache may include store.
    if layer_of("store/kv_store.h") not in LAYERS["cache"]:
        print("self-test: cache may not include store")
        failures += 1
    return 1 if failures else 0


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=repo)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args.root)
    bad = check(args.root)
    for v in bad:
        print(v)
    if bad:
        print(f"{len(bad)} include(s) break the layering (table: scripts/check_layering.py, "
              "picture: docs/architecture.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
