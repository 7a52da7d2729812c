//! Every `SWA_API` function of include/swacache.h is used by the safe crate
//! (as `sys::swa_x`), or is named in `OMITTED` with the reason it is left out
//! on purpose. A function added to the header without a wrapper (or an entry
//! here) fails this test.
use std::collections::BTreeSet;
use std::path::Path;

const GRAPH: &str = "graph decode: experimental (behind SWACACHE_EXPERIMENTAL), made for CUDA graph capture \
                     with device pointers and streams; raw declarations in swacache-sys with the `experimental` feature";
const LITERAL: &str = "the wrapper writes the whole struct as a literal naming every field, so a field added \
                       to the header is a compile error instead of a silent default";

const OMITTED: &[(&str, &str)] = &[
    ("swa_decode_graph_create", GRAPH),
    ("swa_decode_graph_destroy", GRAPH),
    ("swa_decode_graph_import", GRAPH),
    ("swa_decode_graph_release", GRAPH),
    ("swa_decode_graph_plan", GRAPH),
    ("swa_decode_graph_step", GRAPH),
    ("swa_decode_graph_error_record", GRAPH),
    ("swa_decode_graph_check", GRAPH),
    ("swa_decode_graph_reset_error", GRAPH),
    ("swa_slot_set_lengths", GRAPH),
    ("swa_step_args_init", LITERAL),
    ("swa_merge_args_init", LITERAL),
    ("swa_project_args_init", LITERAL),
    ("swa_rope_args_init", LITERAL),
    ("swa_compress_args_init", LITERAL),
];

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Names declared by lines that start with `SWA_API`: the identifier before the first `(`.
fn header_functions(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("SWA_API ")) {
        if let Some(open) = line.find('(') {
            let head = line[..open].trim_end();
            let start = head.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
            names.insert(head[start..].to_string());
        }
    }
    assert!(names.len() > 50, "parsed only {} SWA_API functions", names.len());
    names
}

/// Every `sys::swa_x` outside comments in the crate's sources.
fn used_functions() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().map_or(true, |e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(i) = rest.find("sys::swa_") {
                let tail = &rest[i + "sys::".len()..];
                let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
                used.insert(tail[..end].to_string());
                rest = &tail[end..];
            }
        }
    }
    used
}

fn header() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../include/swacache.h");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn every_header_function_is_wrapped_or_omitted_on_purpose() {
    let (header, used) = (header_functions(&header()), used_functions());
    let omitted: BTreeSet<String> = OMITTED.iter().map(|(n, _)| n.to_string()).collect();
    let missing: Vec<_> = header.iter().filter(|n| !used.contains(*n) && !omitted.contains(*n)).collect();
    assert!(missing.is_empty(), "SWA_API functions neither wrapped nor in OMITTED: {missing:?}");
    let stale: Vec<_> = omitted.iter().filter(|n| !header.contains(*n)).collect();
    assert!(stale.is_empty(), "OMITTED names functions the header no longer has: {stale:?}");
    let now_used: Vec<_> = omitted.iter().filter(|n| used.contains(*n)).collect();
    assert!(now_used.is_empty(), "OMITTED names functions the crate now uses: {now_used:?}");
    assert!(OMITTED.iter().all(|(_, why)| why.len() > 20));
}

#[test]
fn a_new_header_function_is_noticed() {
    let text = header() + "\nSWA_API swa_status_t swa_brand_new(swa_cache_t* cache);\n";
    let names = header_functions(&text);
    assert!(names.contains("swa_brand_new") && !used_functions().contains("swa_brand_new"));
}
