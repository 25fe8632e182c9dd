//! How a pipeline opens: `Options` (the host's context, stream, bindings, communicator and
//! libraries), the element types of bindings, and their C form.

use std::ffi::CString;
use std::os::raw::c_void;
use std::path::PathBuf;
use std::ptr;

use crate::error::{c_path, c_string, Result};
use crate::sys;

/// A buffer's element type, as the plan names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    I32,
    U32,
    I64,
    U64,
    U8,
    /// Only as a binding's type: a bf16 buffer takes u16 bit patterns too.
    U16,
}

pub(crate) const DTYPES: [(DType, sys::pipec_dtype); 10] = [
    (DType::F32, sys::PIPEC_F32),
    (DType::F16, sys::PIPEC_F16),
    (DType::BF16, sys::PIPEC_BF16),
    (DType::F64, sys::PIPEC_F64),
    (DType::I32, sys::PIPEC_I32),
    (DType::U32, sys::PIPEC_U32),
    (DType::I64, sys::PIPEC_I64),
    (DType::U64, sys::PIPEC_U64),
    (DType::U8, sys::PIPEC_U8),
    (DType::U16, sys::PIPEC_U16),
];

impl DType {
    pub fn raw(self) -> sys::pipec_dtype {
        DTYPES.iter().find(|(d, _)| *d == self).map(|(_, raw)| *raw).expect("every DType has its code")
    }

    pub fn from_raw(raw: sys::pipec_dtype) -> Option<DType> {
        DTYPES.iter().find(|(_, r)| *r == raw).map(|(d, _)| *d)
    }

    /// Whether piperun prints its values as integers (`str(v)`) rather than `{v:.4g}`.
    pub fn is_integer(self) -> bool {
        !matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }
}

/// One of the host's device allocations used as a named buffer's memory.
#[derive(Clone, Debug)]
pub struct Binding {
    pub buffer: String,
    pub pointer: sys::CUdeviceptr,
    pub bytes: usize,
    pub dtype: DType,
}

/// How a pipeline opens; `Options::default()` is the C library's defaults: device 0's primary
/// context, a stream of the pipeline's own, every buffer allocated by pipec.
#[derive(Clone, Debug)]
pub struct Options {
    device: i32,
    context: sys::CUcontext,
    stream: sys::CUstream,
    bindings: Vec<Binding>,
    nccl_comm: *mut c_void,
    driver_library: Option<PathBuf>,
    cublaslt_library: Option<PathBuf>,
    nccl_library: Option<PathBuf>,
    nccl_timeout_s: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            device: 0,
            context: ptr::null_mut(),
            stream: ptr::null_mut(),
            bindings: Vec::new(),
            nccl_comm: ptr::null_mut(),
            driver_library: None,
            cublaslt_library: None,
            nccl_library: None,
            nccl_timeout_s: 0.0,
        }
    }
}

impl Options {
    /// The device whose primary context the pipeline uses (without `context`).
    pub fn device(mut self, ordinal: i32) -> Options {
        self.device = ordinal;
        self
    }

    /// The CUDA driver library to load (default: $PIPEC_DRIVER_LIBRARY, else libcuda.so.1).
    pub fn driver_library(mut self, path: impl Into<PathBuf>) -> Options {
        self.driver_library = Some(path.into());
        self
    }

    /// The cuBLASLt library, for plans with GEMM nodes (default: $PIPEC_CUBLASLT_LIBRARY, else
    /// libcublasLt.so.13, then .12).
    pub fn cublaslt_library(mut self, path: impl Into<PathBuf>) -> Options {
        self.cublaslt_library = Some(path.into());
        self
    }

    /// The NCCL library, for plans with collective nodes (default: $PIPEC_NCCL_LIBRARY, else
    /// libnccl.so.2).
    pub fn nccl_library(mut self, path: impl Into<PathBuf>) -> Options {
        self.nccl_library = Some(path.into());
        self
    }

    /// The longest a wait for work with collectives may take before pipec aborts the
    /// communicator (default 0: $PIPEC_NCCL_TIMEOUT, else 120 s).
    pub fn nccl_timeout(mut self, seconds: f64) -> Options {
        self.nccl_timeout_s = seconds;
        self
    }

    /// Use the host's context instead of the device's primary one.
    ///
    /// # Safety
    /// `context` is a valid CUDA context that outlives the pipeline.
    pub unsafe fn context(mut self, context: sys::CUcontext) -> Options {
        self.context = context;
        self
    }

    /// Enqueue on the host's stream instead of one of the pipeline's own.
    ///
    /// # Safety
    /// `stream` is a valid stream of the pipeline's context that outlives the pipeline.
    pub unsafe fn stream(mut self, stream: sys::CUstream) -> Options {
        self.stream = stream;
        self
    }

    /// Use the host's allocation as buffer `binding.buffer` (its size and type are checked
    /// against the plan when the pipeline opens).
    ///
    /// # Safety
    /// `binding.pointer` addresses `binding.bytes` bytes of device memory that stay allocated
    /// until the pipeline is closed; pipec never frees them.
    pub unsafe fn bind(mut self, binding: Binding) -> Options {
        self.bindings.push(binding);
        self
    }

    /// The communicator of a plan with collective nodes: rank RANK of WORLD_SIZE, as the bundle
    /// was built (checked at open). The host destroys it after the pipeline is closed, unless a
    /// call failed with `ErrorKind::Collective`: pipec has aborted it then.
    ///
    /// # Safety
    /// `comm` is an `ncclComm_t` the host created, valid while the pipeline is open.
    pub unsafe fn nccl_comm(mut self, comm: *mut c_void) -> Options {
        self.nccl_comm = comm;
        self
    }
}

/// `Options` as the C structure, with the strings and the binding table it points into.
pub(crate) struct RawOptions {
    _names: Vec<CString>,
    _libraries: (Option<CString>, Option<CString>, Option<CString>),
    _bindings: Vec<sys::pipec_binding>,
    pub(crate) raw: sys::pipec_options,
}

impl RawOptions {
    pub(crate) fn new(options: &Options) -> Result<RawOptions> {
        let names = options
            .bindings
            .iter()
            .map(|b| c_string("the buffer name", b.buffer.as_bytes()))
            .collect::<Result<Vec<_>>>()?;
        let bindings: Vec<sys::pipec_binding> = options
            .bindings
            .iter()
            .zip(&names)
            .map(|(b, name)| sys::pipec_binding {
                buffer: name.as_ptr(),
                pointer: b.pointer,
                bytes: b.bytes,
                dtype: b.dtype.raw(),
            })
            .collect();
        let library = |path: &Option<PathBuf>| path.as_deref().map(c_path).transpose();
        let libraries =
            (library(&options.driver_library)?, library(&options.cublaslt_library)?, library(&options.nccl_library)?);
        let mut raw = unsafe {
            let mut raw = std::mem::MaybeUninit::<sys::pipec_options>::zeroed();
            sys::pipec_options_init(raw.as_mut_ptr());
            raw.assume_init()
        };
        raw.device = options.device;
        raw.context = options.context;
        raw.stream = options.stream;
        raw.bindings = if bindings.is_empty() { ptr::null() } else { bindings.as_ptr() };
        raw.binding_count = bindings.len();
        raw.nccl_comm = options.nccl_comm;
        raw.driver_library = libraries.0.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.cublaslt_library = libraries.1.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.nccl_library = libraries.2.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.nccl_timeout_s = options.nccl_timeout_s;
        Ok(RawOptions { _names: names, _libraries: libraries, _bindings: bindings, raw })
    }
}
