"""Redis store over TLS with an ACL user, from Python: a redis-server started
here with --tls-port and certificates made by the openssl CLI. Skipped when
redis-server or openssl is missing, the library has no Redis store, or
redis-server was built without TLS."""

import shutil
import socket
import subprocess
import time

import ctypes

import numpy as np
import pytest

import swacache as sc
from swacache import _lib as L


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_certs(d):
    for ca in ("ca", "otherca"):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "3",
                 "-subj", f"/CN=swacache python test {ca}", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:redis.test,IP:127.0.0.1\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=redis.test", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "3", "-extfile", "server.ext", cwd=d)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        pytest.skip("redis-server or openssl is not on PATH")
    try:
        sc.RedisStore("127.0.0.1", 1, timeout_ms=100)
    except sc.UnimplementedError:
        pytest.skip("this build has no Redis store (hiredis not found)")
    except sc.Error:
        pass
    d = tmp_path_factory.mktemp("redis-tls")
    _make_certs(d)
    port, tls_port = _free_port(), _free_port()
    log = open(d / "server.log", "w")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--tls-port", str(tls_port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(d),
         "--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key"),
         "--tls-ca-cert-file", str(d / "ca.crt"), "--tls-auth-clients", "no"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if proc.poll() is not None:
                text = (d / "server.log").read_text()
                if "TLS" in text or "tls" in text:
                    pytest.skip("this redis-server has no TLS support: " + text[-300:])
                pytest.fail("redis-server exited: " + text[-300:])
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            time.sleep(0.05)
        admin = ["redis-cli", "-p", str(port)]
        subprocess.run(admin + ["ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@all"], check=True,
                       capture_output=True)
        subprocess.run(admin + ["ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+get",
                                "+exists", "+ping"], check=True, capture_output=True)
        yield d, tls_port
    finally:
        proc.kill()
        proc.wait()
        log.close()


def _table_call(store, op, key, buf=None):
    """One call of the store's C table (put/get/exists/remove) on `key`;
    returns (status, size or exists, message)."""
    t = store._live_table()
    k = (ctypes.c_uint8 * len(key)).from_buffer_copy(key)
    msg = ctypes.create_string_buffer(256)
    if op == "put":
        iov = L.Iov(ctypes.cast(ctypes.c_char_p(bytes(buf)), ctypes.c_void_p), len(buf))
        return t.put(t.user_data, k, len(key), ctypes.byref(iov), 1, msg, 256), 0, msg.value
    if op == "get":
        iov = L.Iov(ctypes.addressof(buf), len(buf))
        size = ctypes.c_uint64(len(buf))
        st = t.get(t.user_data, k, len(key), ctypes.byref(iov), 1, ctypes.byref(size), msg, 256)
        return st, size.value, msg.value
    if op == "exists":
        e = ctypes.c_uint32(7)
        return t.exists(t.user_data, k, len(key), ctypes.byref(e), msg, 256), e.value, msg.value
    return t.remove(t.user_data, k, len(key), msg, 256), 0, msg.value


def test_round_trip_over_tls_with_an_acl_user(tls_server):
    d, port = tls_server
    writer = sc.RedisStore("127.0.0.1", port, username="writer", password="wpw", tls=True,
                           tls_ca_file=str(d / "ca.crt"), tls_server_name="redis.test")
    reader = sc.RedisStore("127.0.0.1", port, username="reader", password="rpw", tls=True,
                           tls_ca_file=str(d / "ca.crt"))
    value = np.random.default_rng(7).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    key = b"py-tls\x00key"
    assert _table_call(writer, "put", key, value)[0] == 0
    assert _table_call(reader, "exists", key)[:2] == (0, 1)
    got = ctypes.create_string_buffer(len(value))
    st, size, msg = _table_call(reader, "get", key, got)
    assert st == 0, msg
    assert size == len(value) and got.raw == value
    # The reader may not write: PERMISSION_DENIED naming the server, nothing changed.
    st, _, msg = _table_call(reader, "put", key, b"other")
    assert st == sc.errors.Status.PERMISSION_DENIED, msg
    assert f"127.0.0.1:{port}".encode() in msg and b"NOPERM" in msg
    st, size, _ = _table_call(reader, "get", key, got)
    assert st == 0 and got.raw == value
    assert _table_call(writer, "remove", key)[0] == 0
    assert _table_call(reader, "exists", key)[:2] == (0, 0)
    writer.close()
    reader.close()


def test_tls_failures(tls_server):
    d, port = tls_server
    with pytest.raises(sc.UnauthenticatedError, match="failed verification"):
        sc.RedisStore("127.0.0.1", port, tls=True, tls_ca_file=str(d / "otherca.crt"))
    with pytest.raises(sc.UnauthenticatedError, match="mismatch"):
        sc.RedisStore("127.0.0.1", port, tls=True, tls_ca_file=str(d / "ca.crt"),
                      tls_server_name="other.test")
    with pytest.raises(sc.UnauthenticatedError, match='user "writer"'):
        sc.RedisStore("127.0.0.1", port, username="writer", password="nope", tls=True,
                      tls_ca_file=str(d / "ca.crt"))
    with pytest.raises(sc.UnavailableError, match="plain-TCP client"):
        sc.RedisStore("127.0.0.1", port, timeout_ms=1000)
    with pytest.raises(sc.InvalidArgumentError, match="needs a password"):
        sc.RedisStore("127.0.0.1", port, username="writer", tls=True)
    with pytest.raises(sc.InvalidArgumentError):
        sc.RedisClusterStore(f"127.0.0.1:{port}", tls=True, tls_cert_file=str(d / "server.crt"))
    # Verification off: encrypted, not authenticated; works against any CA.
    sc.RedisStore("127.0.0.1", port, tls=True, tls_verify=False,
                  tls_ca_file=str(d / "otherca.crt")).close()
