//! With the `experimental` feature, the raw graph-decode declarations are
//! reachable as `swacache::sys` and link against the library. (Without it they
//! do not exist: the compile_fail doc test in lib.rs.)
#![cfg(feature = "experimental")]
mod common;
use swacache::sys;

#[test]
fn graph_decode_is_declared_and_checks_its_arguments() {
    let cache = common::cache();
    let mut graph: *mut sys::swa_decode_graph_t = std::ptr::null_mut();
    // SAFETY: a NULL cache is refused before anything is touched.
    let st = unsafe { sys::swa_decode_graph_create(std::ptr::null_mut(), 1, 1, &mut graph) };
    assert_eq!(st, sys::SWA_INVALID_ARGUMENT);
    assert!(graph.is_null());
    // A real graph on the CPU backend, created and destroyed.
    // SAFETY: the cache outlives the graph; out is writable.
    let st = unsafe { sys::swa_decode_graph_create(cache.as_ptr(), 2, 1, &mut graph) };
    assert_eq!(st, sys::SWA_OK, "{}", unsafe { std::ffi::CStr::from_ptr(sys::swa_last_error()) }.to_string_lossy());
    assert!(!graph.is_null());
    // SAFETY: the graph was created above and is destroyed once.
    unsafe { sys::swa_decode_graph_destroy(graph) };
    assert_eq!(sys::SWA_GRAPH_OK, 0);
}
