//! Errors: a C status as an `ErrorKind`, with the library's one-line message; and the C
//! strings that cross the boundary.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys;

/// Why a call failed: the C status's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    Io,
    Bundle,
    Unsupported,
    Bind,
    Cuda,
    Library,
    OutOfMemory,
    UpdateRefused,
    State,
    LaunchLimits,
    /// NCCL failed or a wait outlasted the timeout: pipec aborted the host's communicator, which
    /// the host must neither use nor destroy again.
    Collective,
    /// A status this crate does not know (a newer library).
    Other(i32),
}

impl ErrorKind {
    pub fn from_status(status: sys::pipec_status) -> ErrorKind {
        match status {
            sys::PIPEC_ERROR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::PIPEC_ERROR_IO => ErrorKind::Io,
            sys::PIPEC_ERROR_BUNDLE => ErrorKind::Bundle,
            sys::PIPEC_ERROR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::PIPEC_ERROR_BIND => ErrorKind::Bind,
            sys::PIPEC_ERROR_CUDA => ErrorKind::Cuda,
            sys::PIPEC_ERROR_LIBRARY => ErrorKind::Library,
            sys::PIPEC_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::PIPEC_ERROR_UPDATE_REFUSED => ErrorKind::UpdateRefused,
            sys::PIPEC_ERROR_STATE => ErrorKind::State,
            sys::PIPEC_ERROR_LAUNCH_LIMITS => ErrorKind::LaunchLimits,
            sys::PIPEC_ERROR_COLLECTIVE => ErrorKind::Collective,
            other => ErrorKind::Other(other),
        }
    }
}

/// A failed call: its kind and one line saying what went wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    /// The error of a call that returned `status`, with this thread's last message.
    pub(crate) fn from_status(status: sys::pipec_status) -> Error {
        let message = unsafe { text(sys::pipec_last_error()) };
        let message = if message.is_empty() { format!("a pipec call failed with status {status}") } else { message };
        Error { kind: ErrorKind::from_status(status), message }
    }

    /// A mistake this crate finds before calling the library.
    pub(crate) fn invalid(message: String) -> Error {
        Error { kind: ErrorKind::InvalidArgument, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn check(status: sys::pipec_status) -> Result<()> {
    if status == sys::PIPEC_OK {
        Ok(())
    } else {
        Err(Error::from_status(status))
    }
}

/// A C string the library returned, copied; "" for NULL.
pub(crate) unsafe fn text(pointer: *const c_char) -> String {
    if pointer.is_null() {
        String::new()
    } else {
        CStr::from_ptr(pointer).to_string_lossy().into_owned()
    }
}

pub(crate) fn c_string(what: &str, value: &[u8]) -> Result<CString> {
    CString::new(value)
        .map_err(|_| Error::invalid(format!("{what} `{}` holds a NUL byte", String::from_utf8_lossy(value))))
}

pub(crate) fn c_path(path: &Path) -> Result<CString> {
    c_string("the path", path.as_os_str().as_bytes())
}
