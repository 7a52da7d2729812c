"""A Store callback's exception always becomes a failure status. Before the
fix an Error whose code was set past 32 bits (2**40) came back as OK (ctypes
kept the low 32 bits of the returned int), and a code that int() refuses
(None, "x"), a message that is not a string, or an exception whose str()
raises made the failure path itself raise, so ctypes returned an undefined
value: a failed put could report a successful save."""

import pytest

import swacache as sc
from helpers import layer


class _BadStr(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def _error(code=None, message="boom"):
    e = sc.Error("boom")
    if code is not None:
        e.code = code
    e.message = message
    return e


@pytest.mark.parametrize("exc", [
    _error(code=2**40), _error(code=2**32), _error(code="x"), _error(code=-5),
    _error(code=0), _error(message=None), _BadStr(),
], ids=["2**40", "2**32", "str", "negative", "OK", "message None", "str raises"])
def test_every_callback_exception_fails_the_call(exc):
    class S(sc.Store):
        def put(self, key, value):
            raise exc

        def get(self, key):
            raise exc

    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        s = int(c.alloc())
        c.set_store(S())
        with pytest.raises(sc.UnknownError):
            c.save(s, b"k")
        with pytest.raises(sc.UnknownError):
            c.restore(s, b"k")


class _LyingBytes(bytes):
    """A bytes subclass whose __len__ and __bytes__ claim another size."""

    def __len__(self):
        return 1 << 20

    def __bytes__(self):
        return b"x"


def test_a_get_returning_a_lying_bytes_subclass_reads_its_real_bytes():
    """Store.get may return any bytes-like object; its size is what the buffer
    protocol says, not what __len__ or __bytes__ claim. Before the fix the
    length came from __len__ and the copy from bytes(), so a subclass claiming
    more bytes than it held made the callback copy past the end of a shorter
    object."""
    blobs = {}

    class S(sc.Store):
        def put(self, key, value):
            blobs[key] = value

        def get(self, key):
            return _LyingBytes(blobs[key])

    with sc.Cache(window=8, max_slots=2, layers=[layer()]) as c:
        s = int(c.alloc())
        c.set_store(S())
        c.save(s, b"k")
        (stored,) = blobs
        assert len(memoryview(_LyingBytes(blobs[stored]))) == len(blobs[stored]) > 1
        c.restore(s, b"k")  # the real bytes, whole: the blob checks pass
        blobs[stored] = blobs[stored][:-1]
        with pytest.raises(sc.Error):
            c.restore(s, b"k")  # one byte short: refused, never read past
