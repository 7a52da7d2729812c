//go:build !swacache_experimental

package swacache

// Experimental is false without the swacache_experimental build tag: the
// experimental part of the C API (experimental.go) is not compiled.
const Experimental = false
