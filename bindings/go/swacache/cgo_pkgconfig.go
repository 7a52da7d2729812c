//go:build !swacache_nopkgconfig

package swacache

// The default build finds the library with pkg-config (an installed
// libswacache, or the uninstalled swacache-uninstalled.pc that ci.sh writes).
// Build with -tags swacache_nopkgconfig and set CGO_CFLAGS/CGO_LDFLAGS
// yourself to skip pkg-config; see README.md.

// #cgo pkg-config: swacache
import "C"
