"""Loading, versions, struct sizes, defaults, status codes."""

import ctypes
import os
import pathlib
import re
import subprocess
import sys

import pytest

import swacache as sc
from swacache import _lib as L

REPO = pathlib.Path(__file__).resolve().parents[3]
PKG = pathlib.Path(__file__).resolve().parents[1]


def header_version():
    text = (REPO / "include" / "swacache.h").read_text()
    return tuple(int(re.search(rf"#define SWA_VERSION_{p} (\d+)", text).group(1))
                 for p in ("MAJOR", "MINOR", "PATCH"))


def test_binding_matches_header_version():
    assert sc.HEADER_VERSION == header_version()
    assert sc.HEADER_VERSION_NUMBER == sc.version_number() or \
        sc.version_number() // 100 >= sc.HEADER_VERSION_NUMBER // 100


def test_library_version():
    major, minor, patch = (int(x) for x in sc.version().split("."))
    assert sc.version_number() == major * 10000 + minor * 100 + patch
    assert (major, minor) >= sc.HEADER_VERSION[:2]


def _import_with(env_update, unset=()):
    env = dict(os.environ)
    for k in unset:
        env.pop(k, None)
    env.update(env_update)
    env["PYTHONPATH"] = str(PKG)
    return subprocess.run([sys.executable, "-c", "import swacache"], env=env,
                          capture_output=True, text=True)


def test_missing_library_from_env_names_the_variable(tmp_path):
    r = _import_with({"SWACACHE_LIBRARY": str(tmp_path / "nope.so")})
    assert r.returncode != 0
    assert "LibraryNotFoundError" in r.stderr
    assert "SWACACHE_LIBRARY" in r.stderr and "nope.so" in r.stderr


def test_env_may_name_a_directory():
    lib = os.environ["SWACACHE_LIBRARY"]
    r = _import_with({"SWACACHE_LIBRARY": os.path.dirname(lib)})
    assert r.returncode == 0, r.stderr


def test_missing_library_without_env_names_both():
    if ctypes.util.find_library("swacache"):
        pytest.skip("a libswacache is installed on the loader's path")
    r = _import_with({"LD_LIBRARY_PATH": ""}, unset=("SWACACHE_LIBRARY",))
    assert r.returncode != 0
    assert "SWACACHE_LIBRARY" in r.stderr and "LD_LIBRARY_PATH" in r.stderr


def _bundle(tmp_path, lib_bytes):
    """A copy of the package with a library inside it, as a wheel holds it."""
    import shutil
    pkg = tmp_path / "swacache"
    shutil.copytree(PKG / "swacache", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "lib").mkdir()
    (pkg / "lib" / "libswacache.so.0").write_bytes(lib_bytes)
    return pkg


def _run_in(path, code, env_update, unset=()):
    env = dict(os.environ)
    for k in unset:
        env.pop(k, None)
    env.update(env_update)
    env["PYTHONPATH"] = str(path)
    # `python -c` puts the working directory first on sys.path: run in `path`,
    # or the checkout's own swacache/ (no library inside) would be imported.
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=str(path))


def test_bundled_library_is_found_without_environment(tmp_path):
    real = pathlib.Path(os.environ["SWACACHE_LIBRARY"]).read_bytes()
    pkg = _bundle(tmp_path, real)
    r = _run_in(tmp_path, "import swacache, swacache._lib as L; print(L.lib()._name); "
                "print(swacache.version())", {"LD_LIBRARY_PATH": ""}, unset=("SWACACHE_LIBRARY",))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(pkg / "lib" / "libswacache.so.0")


def test_environment_overrides_the_bundled_library(tmp_path):
    pkg = _bundle(tmp_path, b"not a shared library")
    lib = os.environ["SWACACHE_LIBRARY"]
    r = _run_in(tmp_path, "import swacache._lib as L; print(L.lib()._name)",
                {"SWACACHE_LIBRARY": lib})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == lib
    # Without the variable the broken bundled file is tried, and named.
    r = _run_in(tmp_path, "import swacache", {"LD_LIBRARY_PATH": ""}, unset=("SWACACHE_LIBRARY",))
    if r.returncode == 0:
        pytest.skip("a libswacache is installed on the loader's path")
    assert "bundled " + str(pkg / "lib" / "libswacache.so.0") in r.stderr


class _FakeLib:
    def __init__(self, n):
        self.n = n

    def swa_version_number(self):
        return self.n

    def swa_version_string(self):
        return b"fake"


def test_version_check():
    maj, mi, _ = sc.HEADER_VERSION
    assert L.check_version(_FakeLib(maj * 10000 + mi * 100 + 7))
    assert L.check_version(_FakeLib(maj * 10000 + (mi + 1) * 100))
    with pytest.raises(sc.VersionMismatchError, match="not compatible"):
        L.check_version(_FakeLib((maj + 1) * 10000 + mi * 100))
    if mi > 0:
        with pytest.raises(sc.VersionMismatchError):
            L.check_version(_FakeLib(maj * 10000 + (mi - 1) * 100))


@pytest.mark.parametrize("struct,init", [
    (L.LayerDesc, "swa_layer_desc_init"), (L.Config, "swa_config_init"),
    (L.PlanOptions, "swa_plan_options_init"), (L.StepArgs, "swa_step_args_init"),
    (L.MergeArgs, "swa_merge_args_init"), (L.KvStore, "swa_kv_store_init"),
    (L.MemoryConfig, "swa_store_memory_config_init"),
    (L.DirectoryConfig, "swa_store_directory_config_init"),
    (L.RedisConfig, "swa_store_redis_config_init"),
    (L.RedisClusterConfig, "swa_store_redis_cluster_config_init"),
    (L.TieredConfig, "swa_store_tiered_config_init"),
    (L.ProjectArgs, "swa_project_args_init"), (L.RopeArgs, "swa_rope_args_init"),
])
def test_struct_sizes_match_the_library(struct, init):
    s = struct()
    getattr(L.lib(), init)(ctypes.byref(s))
    assert s.struct_size == ctypes.sizeof(struct)
    getattr(L.lib(), init)(None)  # NULL is ignored


def test_fixed_layout_structs():
    assert ctypes.sizeof(L.Seq) == 16
    assert ctypes.sizeof(L.Segment) == 12
    assert ctypes.sizeof(L.Iov) == 2 * ctypes.sizeof(ctypes.c_void_p)


def test_caller_sized_structs_are_accepted_and_bad_sizes_rejected():
    with sc.Cache(window=8, max_slots=2, layers=[sc.Layer(head_dim=32, q_heads=2)]) as c:
        for struct, fn, extra in [(L.Layout, "swa_cache_layout", ()),
                                  (L.CacheStats, "swa_cache_stats", ())]:
            s = struct(struct_size=ctypes.sizeof(struct))
            assert getattr(L.lib(), fn)(c.handle, *extra, ctypes.byref(s)) == 0
            s.struct_size = 3
            assert getattr(L.lib(), fn)(c.handle, *extra, ctypes.byref(s)) == \
                sc.Status.INVALID_ARGUMENT


def test_layer_and_config_defaults_match_the_library():
    d = L.LayerDesc()
    L.lib().swa_layer_desc_init(ctypes.byref(d))
    py = sc.Layer()
    for name, _ in L.LayerDesc._fields_[1:]:
        if name in ("reserved", "compress_reserved"):  # must be 0; no Layer field
            assert getattr(d, name) == 0
            continue
        assert pytest.approx(float(getattr(d, name))) == float(getattr(py, name)), name
    c = L.Config()
    L.lib().swa_config_init(ctypes.byref(c))
    pc = sc.Config()
    for name in ("window", "draft_tokens", "ring_len", "alignment", "max_slots", "backend",
                 "device", "scale_mode", "num_threads"):
        assert getattr(c, name) == int(getattr(pc, name)), name


def test_status_strings_and_error_classes():
    for st in sc.Status:
        assert sc.status_string(st) == st.name
        if st != sc.Status.OK:
            e = sc.error_for(st, "msg")
            assert isinstance(e, sc.Error) and e.code == st and e.message == "msg"
            assert type(e) is sc.ERROR_CLASSES[st]
    assert sc.status_string(99) == "UNRECOGNIZED_STATUS"
    e = sc.error_for(99, "x")
    assert isinstance(e, sc.UnknownError) and "99" in e.message
    assert issubclass(sc.InvalidArgumentError, ValueError)
    assert issubclass(sc.ClosedError, sc.FailedPreconditionError)


def test_last_error_is_the_failed_calls_message():
    with pytest.raises(sc.InvalidArgumentError) as ei:
        sc.Cache(window=0, layers=[sc.Layer()])
    assert ei.value.message and ei.value.message == sc.last_error()
    assert "window" in ei.value.message
