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
