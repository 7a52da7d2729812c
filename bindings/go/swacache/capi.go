package swacache

// The C wrappers live in capi.h; this file holds the Go helpers around them.

/*
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import "unsafe"

// result converts a wrapper's return into an error, freeing the message copy.
func result(r C.swago_ret) error {
	if r.status == 0 {
		return nil
	}
	msg := C.GoString(r.msg)
	C.free(unsafe.Pointer(r.msg))
	return newError(Code(r.status), msg)
}

// emptyPtr is the pointer passed for a present but empty slice.
func emptyPtr() unsafe.Pointer { return C.swago_empty_ptr() }

func statusString(c Code) string { return C.GoString(C.swa_status_string(C.swa_status_t(c))) }

// Version returns the linked library's version, "major.minor.patch"
// (swa_version_string). Thread-safe.
func Version() string { return C.GoString(C.swa_version_string()) }

// VersionNumber returns the linked library's major*10000 + minor*100 + patch
// (swa_version_number). Thread-safe.
func VersionNumber() uint32 { return uint32(C.swa_version_number()) }

// HeaderVersionNumber is SWA_VERSION_NUMBER of the header this package was
// compiled against; compare it with VersionNumber to detect a mismatch.
const HeaderVersionNumber = C.SWA_VERSION_NUMBER
