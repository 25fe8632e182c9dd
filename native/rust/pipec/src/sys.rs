//! Raw declarations of `native/include/pipec.h`, one for one: the C ABI the safe wrapper in
//! `lib.rs` calls. Names, types and field order follow the header; the CUDA handle types are
//! opaque pointers as `cuda.h` declares them. A test in `lib.rs` checks the layouts.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

#[repr(C)]
pub struct CUctx_st {
    _private: [u8; 0],
}
#[repr(C)]
pub struct CUstream_st {
    _private: [u8; 0],
}
#[repr(C)]
pub struct CUgraph_st {
    _private: [u8; 0],
}
#[repr(C)]
pub struct CUgraphNode_st {
    _private: [u8; 0],
}
pub type CUcontext = *mut CUctx_st;
pub type CUstream = *mut CUstream_st;
pub type CUgraph = *mut CUgraph_st;
pub type CUgraphNode = *mut CUgraphNode_st;
pub type CUdeviceptr = u64;

pub const PIPEC_ABI_VERSION: c_int = 1;
pub const PIPEC_BUNDLE_FORMAT_VERSION: c_int = 2;
pub const PIPEC_OPTIONS_VERSION: u32 = 2;

/// `enum pipec_status` (a C enum: an `int`).
pub type pipec_status = c_int;
pub const PIPEC_OK: pipec_status = 0;
pub const PIPEC_ERROR_INVALID_ARGUMENT: pipec_status = 1;
pub const PIPEC_ERROR_IO: pipec_status = 2;
pub const PIPEC_ERROR_BUNDLE: pipec_status = 3;
pub const PIPEC_ERROR_UNSUPPORTED: pipec_status = 4;
pub const PIPEC_ERROR_BIND: pipec_status = 5;
pub const PIPEC_ERROR_CUDA: pipec_status = 6;
pub const PIPEC_ERROR_LIBRARY: pipec_status = 7;
pub const PIPEC_ERROR_OUT_OF_MEMORY: pipec_status = 8;
pub const PIPEC_ERROR_UPDATE_REFUSED: pipec_status = 9;
pub const PIPEC_ERROR_STATE: pipec_status = 10;
pub const PIPEC_ERROR_LAUNCH_LIMITS: pipec_status = 11;
pub const PIPEC_ERROR_COLLECTIVE: pipec_status = 12;

/// `enum pipec_dtype`.
pub type pipec_dtype = c_int;
pub const PIPEC_F32: pipec_dtype = 0;
pub const PIPEC_F16: pipec_dtype = 1;
pub const PIPEC_BF16: pipec_dtype = 2;
pub const PIPEC_F64: pipec_dtype = 3;
pub const PIPEC_I32: pipec_dtype = 4;
pub const PIPEC_U32: pipec_dtype = 5;
pub const PIPEC_I64: pipec_dtype = 6;
pub const PIPEC_U64: pipec_dtype = 7;
pub const PIPEC_U8: pipec_dtype = 8;
pub const PIPEC_U16: pipec_dtype = 9;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct pipec_binding {
    pub buffer: *const c_char,
    pub pointer: CUdeviceptr,
    pub bytes: usize,
    pub dtype: pipec_dtype,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct pipec_options {
    pub version: u32,
    pub device: c_int,
    pub context: CUcontext,
    pub stream: CUstream,
    pub bindings: *const pipec_binding,
    pub binding_count: usize,
    pub nccl_comm: *mut c_void,
    pub driver_library: *const c_char,
    pub cublaslt_library: *const c_char,
    pub nccl_library: *const c_char,
    pub nccl_timeout_s: f64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct pipec_file {
    pub path: *const c_char,
    pub data: *const c_void,
    pub size: usize,
}

/// `enum pipec_value_kind`.
pub type pipec_value_kind = c_int;
pub const PIPEC_VALUE_INT: pipec_value_kind = 0;
pub const PIPEC_VALUE_UINT: pipec_value_kind = 1;
pub const PIPEC_VALUE_FLOAT: pipec_value_kind = 2;
pub const PIPEC_VALUE_BOOL: pipec_value_kind = 3;

/// The union `pipec_value.as`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pipec_value_as {
    pub i: i64,
    pub u: u64,
    pub f: f64,
    pub b: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct pipec_value {
    pub kind: pipec_value_kind,
    pub as_: pipec_value_as,
}

/// `pipec_pipeline`: opaque, owned through the pointer `pipec_open_*` gives.
#[repr(C)]
pub struct pipec_pipeline {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct pipec_verify_report {
    pub version: u32,
    pub ok: c_int,
    pub buffers: usize,
    pub mismatches: usize,
    pub first: [c_char; 1024],
}

extern "C" {
    pub fn pipec_version() -> *const c_char;
    pub fn pipec_abi_version() -> c_int;
    pub fn pipec_last_error() -> *const c_char;
    pub fn pipec_options_init(options: *mut pipec_options);

    pub fn pipec_open_dir(
        dir: *const c_char,
        options: *const pipec_options,
        out: *mut *mut pipec_pipeline,
    ) -> pipec_status;
    pub fn pipec_open_memory(
        files: *const pipec_file,
        count: usize,
        options: *const pipec_options,
        out: *mut *mut pipec_pipeline,
    ) -> pipec_status;

    pub fn pipec_step(p: *mut pipec_pipeline, n: u64) -> pipec_status;
    pub fn pipec_launch(p: *mut pipec_pipeline, stream: CUstream, n: u64) -> pipec_status;
    pub fn pipec_synchronize(p: *mut pipec_pipeline) -> pipec_status;
    pub fn pipec_stream(p: *const pipec_pipeline) -> CUstream;

    pub fn pipec_read_diag(p: *const pipec_pipeline, label: *const c_char, out: *mut f64) -> pipec_status;
    pub fn pipec_diag_count(p: *const pipec_pipeline) -> usize;
    pub fn pipec_diag_at(
        p: *const pipec_pipeline,
        index: usize,
        label: *mut *const c_char,
        value: *mut f64,
    ) -> pipec_status;

    pub fn pipec_buffer(
        p: *const pipec_pipeline,
        name: *const c_char,
        pointer: *mut CUdeviceptr,
        bytes: *mut usize,
        dtype: *mut pipec_dtype,
    ) -> pipec_status;
    pub fn pipec_buffer_count(p: *const pipec_pipeline) -> usize;
    pub fn pipec_buffer_name(p: *const pipec_pipeline, index: usize) -> *const c_char;
    pub fn pipec_read_buffer(
        p: *mut pipec_pipeline,
        name: *const c_char,
        host: *mut c_void,
        bytes: usize,
    ) -> pipec_status;
    pub fn pipec_write_buffer(
        p: *mut pipec_pipeline,
        name: *const c_char,
        host: *const c_void,
        bytes: usize,
    ) -> pipec_status;

    pub fn pipec_update_plan(
        p: *mut pipec_pipeline,
        plan_json: *const c_char,
        length: usize,
        changed: *mut usize,
    ) -> pipec_status;
    pub fn pipec_update_constants(
        p: *mut pipec_pipeline,
        names: *const *const c_char,
        values: *const pipec_value,
        count: usize,
        changed: *mut usize,
    ) -> pipec_status;
    pub fn pipec_constant(
        p: *mut pipec_pipeline,
        name: *const c_char,
        value: *mut pipec_value,
        structural: *mut *const c_char,
    ) -> pipec_status;
    pub fn pipec_run_eager(p: *mut pipec_pipeline, n: u64) -> pipec_status;
    pub fn pipec_verify(p: *mut pipec_pipeline, steps: u64, report: *mut pipec_verify_report) -> pipec_status;

    pub fn pipec_save_state(p: *mut pipec_pipeline, dir: *const c_char, steps: u64) -> pipec_status;
    pub fn pipec_load_state(p: *mut pipec_pipeline, dir: *const c_char) -> pipec_status;

    pub fn pipec_add_to_graph(
        p: *mut pipec_pipeline,
        host_graph: CUgraph,
        deps: *const CUgraphNode,
        ndeps: usize,
        out_last: *mut CUgraphNode,
    ) -> pipec_status;

    pub fn pipec_gemm_count(p: *const pipec_pipeline) -> usize;
    pub fn pipec_gemm_at(
        p: *const pipec_pipeline,
        index: usize,
        node: *mut *const c_char,
        stored: *mut c_int,
        why: *mut *const c_char,
    ) -> pipec_status;

    pub fn pipec_close(p: *mut pipec_pipeline) -> pipec_status;
}
