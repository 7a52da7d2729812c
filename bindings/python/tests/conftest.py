import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
if "SWACACHE_LIBRARY" not in os.environ:
    cand = REPO / "build" / "libswacache.so"
    if cand.exists():
        os.environ["SWACACHE_LIBRARY"] = str(cand)
