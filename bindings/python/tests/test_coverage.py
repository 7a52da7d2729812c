"""Every SWA_API function of include/swacache.h is called by the binding, or
named in OMITTED with the reason it is left out on purpose. A function added
to the header without a wrapper (or an entry here) fails this test."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "swacache"

_GRAPH = ("graph decode: experimental (behind SWACACHE_EXPERIMENTAL), made for CUDA "
          "graph capture with device pointers and streams; an engine reaches it through "
          "ctypes directly")
OMITTED = {
    "swa_decode_graph_create": _GRAPH,
    "swa_decode_graph_destroy": _GRAPH,
    "swa_decode_graph_import": _GRAPH,
    "swa_decode_graph_release": _GRAPH,
    "swa_decode_graph_plan": _GRAPH,
    "swa_decode_graph_step": _GRAPH,
    "swa_decode_graph_error_record": _GRAPH,
    "swa_decode_graph_check": _GRAPH,
    "swa_decode_graph_reset_error": _GRAPH,
    "swa_slot_set_lengths": _GRAPH,
}


def header_functions() -> set:
    text = (ROOT / "include" / "swacache.h").read_text()
    names = set(re.findall(r"^SWA_API\b[^(;]*?\b(swa_\w+)\s*\(", text, re.M))
    assert len(names) > 50, f"parsed only {len(names)} SWA_API functions"
    return names


def wrapped_functions() -> set:
    called = set()
    for path in PACKAGE.glob("*.py"):
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        called |= set(re.findall(r"\b_?lib\.(swa_\w+)\b", code))
    return called


def test_every_header_function_is_wrapped_or_omitted_on_purpose():
    header, wrapped = header_functions(), wrapped_functions()
    missing = sorted(header - wrapped - set(OMITTED))
    assert not missing, f"SWA_API functions neither wrapped nor in OMITTED: {missing}"


def test_the_omitted_list_is_not_stale():
    header, wrapped = header_functions(), wrapped_functions()
    gone = sorted(set(OMITTED) - header)
    assert not gone, f"OMITTED names functions the header no longer has: {gone}"
    now_wrapped = sorted(set(OMITTED) & wrapped)
    assert not now_wrapped, f"OMITTED names functions the binding now wraps: {now_wrapped}"
    assert all(len(reason) > 20 for reason in OMITTED.values())


def test_the_parser_sees_a_new_function(tmp_path):
    # The check can fail: a header with one more SWA_API function is caught.
    text = (ROOT / "include" / "swacache.h").read_text()
    extra = text + "\nSWA_API swa_status_t swa_brand_new(swa_cache_t* cache);\n"
    names = set(re.findall(r"^SWA_API\b[^(;]*?\b(swa_\w+)\s*\(", extra, re.M))
    assert "swa_brand_new" in names - wrapped_functions() - set(OMITTED)
