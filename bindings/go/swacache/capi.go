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
