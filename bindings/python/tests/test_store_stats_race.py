"""Statistics of a built-in store that a cache owns, read while another thread
closes the cache or replaces the store: the read runs as a counted call on
the cache (close() waits for it) and under its store lock, instead of
checking "still attached" and then reading a table that the close could free
in between (use after free)."""

import threading

import pytest

import swacache as sc
import swacache._stores as stores_mod
from helpers import layer


class _Racing:
    """Wraps the library: the first stats call starts `action` on another
    thread and gives it 0.5 s before reading the statistics."""

    def __init__(self, real, name, action):
        self.real, self.name, self.action = real, name, action
        self.finished_during_read = None

    def __getattr__(self, n):
        fn = getattr(self.real, n)
        if n != self.name:
            return fn

        def wrapped(*args):
            if self.finished_during_read is None:
                t = threading.Thread(target=self.action)
                t.start()
                t.join(0.5)
                self.finished_during_read = not t.is_alive()
                self.thread = t
            return fn(*args)

        return wrapped


@pytest.mark.parametrize("what", ["close", "replace"])
@pytest.mark.parametrize("kind", ["memory", "tiered"])
def test_stats_of_an_attached_store_hold_off_close_and_replace(monkeypatch, what, kind):
    c = sc.Cache(window=8, max_slots=2, layers=[layer()])
    m = sc.MemoryStore(budget_bytes=1 << 20)
    store = sc.TieredStore([m]) if kind == "tiered" else m
    c.set_store(store)
    action = c.close if what == "close" else (lambda: c.set_store(sc.MemoryStore()))
    name = "swa_store_tiered_stats" if kind == "tiered" else "swa_store_memory_stats"
    spy = _Racing(stores_mod._lib, name, action)
    monkeypatch.setattr(stores_mod, "_lib", spy)
    if kind == "tiered":
        st = store.tier_stats(0)
    else:
        st = m.stats()
    spy.thread.join(10)
    assert not spy.thread.is_alive()
    assert spy.finished_during_read is False, f"{what} ran while the statistics were read"
    assert st.hits == 0 and st.puts == 0
    with pytest.raises(sc.ClosedError):
        store.tier_stats(0) if kind == "tiered" else m.stats()
    c.close()


def test_stats_of_an_owned_store_hold_off_its_close(monkeypatch):
    m = sc.MemoryStore(budget_bytes=1 << 20)
    spy = _Racing(stores_mod._lib, "swa_store_memory_stats", m.close)
    monkeypatch.setattr(stores_mod, "_lib", spy)
    assert m.stats().budget_bytes == 1 << 20
    spy.thread.join(10)
    assert spy.finished_during_read is False and m.state == "released"
