"""Strings that reach C as NUL-terminated strings (store paths, hosts,
passwords, users, TLS files) are refused when they hold a NUL byte, as the Go
and Rust bindings refuse them. Before the fix ctypes cut them short there: a
DirectoryStore("/x/a\\0/evil") used /x/a, a password "pw\\0rest" sent "pw"."""

import pytest

import swacache as sc


def test_a_directory_path_with_a_nul_is_refused_and_creates_nothing(tmp_path):
    target = tmp_path / "a"
    with pytest.raises(sc.InvalidArgumentError, match="path contains a NUL byte"):
        sc.DirectoryStore(str(target) + "\0/evil")
    assert not target.exists()
    sc.DirectoryStore(target).close()  # a PathLike still works
    assert target.is_dir()


@pytest.mark.parametrize("kw,name", [
    (dict(host="127.0.0.1\0evil"), "host"),
    (dict(password="pw\0rest"), "password"),
    (dict(username="u\0x"), "username"),
    (dict(tls_ca_file="/ca\0x"), "tls_ca_file"),
    (dict(tls_server_name="a\0b"), "tls_server_name"),
])
def test_redis_strings_with_a_nul_are_refused(kw, name):
    with pytest.raises(sc.InvalidArgumentError, match=f"{name} contains a NUL byte"):
        sc.RedisStore(port=1, timeout_ms=100, **kw)
    with pytest.raises(sc.InvalidArgumentError, match="contains a NUL byte"):
        sc.RedisClusterStore(nodes="127.0.0.1:1\0x", timeout_ms=100)
