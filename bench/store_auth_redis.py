"""Restore of one DeepSeek-V4-like checkpoint (20 stored MQA layers of
134 x 528 bytes: 1,415,040 stored bytes) from a redis-server on loopback,
without and with a store secret (HMAC-SHA-256 tags), next to the memory
store and a memcpy of the same bytes, timed in alternating batches in one
run (medians). Issue 33, item 2; docs/store.md "Threat model". The tag's
chunk digests run on SWACACHE_STORE_HASH_THREADS threads (read once per
process: run the script once per thread count). Usage (redis-server on PATH):

    SWACACHE_LIBRARY=build/libswacache.so SWACACHE_STORE_HASH_THREADS=2 \
        python bench/store_auth_redis.py
"""
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bindings", "python"))
import swacache as sc  # noqa: E402

SECRET = bytes(range(32))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def make_cache(store, secret, key):
    layers = [sc.Layer(q_heads=1, kv_heads=1, head_dim=512,
                       role=sc.LayerRole.STORED if i < 20 else sc.LayerRole.DROPPED)
              for i in range(40)]
    c = sc.Cache(window=128, draft_tokens=5, max_slots=4, layers=layers,
                 backend=sc.Backend.CPU, num_threads=1, store_secret=secret)
    c.set_store(store)
    a, b = c.alloc(), c.alloc()
    a.save(key)
    return c, b, key


def main():
    if shutil.which("redis-server") is None:
        print("SKIP: redis-server is not on PATH")
        return
    port = free_port()
    tmp = tempfile.mkdtemp()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                            "--dir", tmp], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        runs = {
            "memory": make_cache(sc.MemoryStore(), None, b"plain"),
            "memory + HMAC": make_cache(sc.MemoryStore(), SECRET, b"tagged"),
            "redis": make_cache(sc.RedisStore("127.0.0.1", port), None, b"plain"),
            "redis + HMAC": make_cache(sc.RedisStore("127.0.0.1", port), SECRET, b"tagged"),
        }
        stored = runs["memory"][0].layout.stored_bytes
        src, dst = bytearray(os.urandom(stored)), bytearray(stored)

        def copy():
            dst[:] = src  # one memcpy of the stored bytes

        probes = {"memcpy": copy}
        for name, (_, slot, key) in runs.items():
            probes[name] = (lambda s, k: lambda: s.restore(k))(slot, key)
        times = {k: [] for k in probes}
        for _ in range(15):  # alternating batches
            for name, probe in probes.items():
                t0 = time.perf_counter()
                for _ in range(20):
                    probe()
                times[name].append((time.perf_counter() - t0) / 20)
        print(f"CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f}; stored bytes per "
              f"restore: {stored}; SWACACHE_STORE_HASH_THREADS="
              f"{os.environ.get('SWACACHE_STORE_HASH_THREADS', '(unset)')}")
        med = {k: statistics.median(v) for k, v in times.items()}
        for name, t in med.items():
            base = med[name.replace(" + HMAC", "")]
            print(f"{name:15s} {t * 1e6:9.1f} us  {stored / t / 1e9:6.2f} GB/s  "
                  f"{base / t:5.2f}x untagged")
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
