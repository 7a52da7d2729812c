//! Status codes and the error type.
use std::ffi::CStr;
use std::fmt;

use swacache_sys as sys;

/// The failure codes of the C API (`swa_status_t` without `SWA_OK`), with the
/// pinned values of absl::StatusCode. Bindings map codes; they never parse messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Code {
    /// `SWA_CANCELLED`: the operation was cancelled.
    Cancelled = 1,
    /// `SWA_UNKNOWN`: an error with no better code (also any unrecognised value).
    Unknown = 2,
    /// `SWA_INVALID_ARGUMENT`: an argument is malformed, whatever the state.
    InvalidArgument = 3,
    /// `SWA_DEADLINE_EXCEEDED`: a store call ran out of time.
    DeadlineExceeded = 4,
    /// `SWA_NOT_FOUND`: no such key, slot or entry.
    NotFound = 5,
    /// `SWA_ALREADY_EXISTS`: the entry exists already.
    AlreadyExists = 6,
    /// `SWA_PERMISSION_DENIED`: the caller may not do this.
    PermissionDenied = 7,
    /// `SWA_RESOURCE_EXHAUSTED`: out of slots, memory or budget.
    ResourceExhausted = 8,
    /// `SWA_FAILED_PRECONDITION`: the state does not allow this call now.
    FailedPrecondition = 9,
    /// `SWA_ABORTED`: a concurrent change aborted the call.
    Aborted = 10,
    /// `SWA_OUT_OF_RANGE`: an index past the valid range.
    OutOfRange = 11,
    /// `SWA_UNIMPLEMENTED`: not supported by this build, backend or store.
    Unimplemented = 12,
    /// `SWA_INTERNAL`: a broken invariant (also a panic caught in a Rust store).
    Internal = 13,
    /// `SWA_UNAVAILABLE`: a transient failure (store, device).
    Unavailable = 14,
    /// `SWA_DATA_LOSS`: corrupt or truncated data.
    DataLoss = 15,
    /// `SWA_UNAUTHENTICATED`: missing credentials (store).
    Unauthenticated = 16,
}

impl Code {
    /// All codes, in value order.
    pub const ALL: [Code; 16] = [
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code of a failed `swa_status_t`; `None` for `SWA_OK`, `Unknown` for
    /// values the header does not list (as the library itself reports them).
    pub fn from_raw(status: sys::swa_status_t) -> Option<Code> {
        match status {
            sys::SWA_OK => None,
            1..=16 => Some(Code::ALL[status as usize - 1]),
            _ => Some(Code::Unknown),
        }
    }

    /// The pinned `swa_status_t` value.
    pub fn raw(self) -> sys::swa_status_t {
        self as sys::swa_status_t
    }

    /// The library's fixed English name, e.g. `"INVALID_ARGUMENT"`.
    pub fn name(self) -> &'static str {
        // SAFETY: swa_status_string returns a static NUL-terminated ASCII string.
        unsafe { CStr::from_ptr(sys::swa_status_string(self.raw())) }.to_str().unwrap_or("UNRECOGNIZED_STATUS")
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: its code and the library's message (or the binding's own,
/// for arguments it rejects before calling the library).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, as the library's pinned code.
    pub code: Code,
    /// The explanation; names the offending value.
    pub message: String,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `SWA_OK`, else the code with this thread's `swa_last_error()`.
/// Must run on the thread that made the call, before any other library call.
#[inline]
pub(crate) fn check(status: sys::swa_status_t) -> Result<()> {
    match Code::from_raw(status) {
        None => Ok(()),
        Some(code) => Err(last_error(code)),
    }
}

#[cold]
fn last_error(code: Code) -> Error {
    // SAFETY: swa_last_error returns a thread-local NUL-terminated string that
    // stays valid until the next failing call on this thread; it is copied here.
    let message = unsafe { CStr::from_ptr(sys::swa_last_error()) }.to_string_lossy().into_owned();
    Error { code, message }
}

/// An error raised by the binding itself before any C call.
#[cold]
pub(crate) fn invalid(message: String) -> Error {
    Error::new(Code::InvalidArgument, message)
}
