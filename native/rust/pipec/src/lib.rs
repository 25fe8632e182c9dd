//! Run pipec bundles from Rust: the graph `pipec build FILE -o DIR` describes, built explicitly
//! and replayed by pipec's C runtime (`native/`, one header: `native/include/pipec.h`).
//!
//! [`sys`] holds the raw declarations; this module wraps them: a [`Pipeline`] owns what the C
//! library opened and closes it on `Drop`; every call returns a [`Result`] whose [`Error`] carries
//! the library's one-line message (`pipec_last_error`). Handles of the host's own CUDA objects
//! (context, stream, device allocations, a graph) cross the boundary as raw pointers, so the
//! calls that take them are `unsafe`: the host keeps them valid while the pipeline uses them.
//!
//! Thread safety follows the C library's: a `Pipeline` may move to another thread (`Send`) but
//! is not shared between threads (`!Sync`; every call that changes it takes `&mut self`).
//! Different pipelines may be used from different threads at once.

pub mod plan;
pub mod report;
pub mod sys;

mod error;
mod live;
mod options;

use std::path::Path;
use std::ptr::{self, NonNull};

use crate::error::{c_path, c_string, check, text};
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::live::{Constant, Value};
use crate::options::RawOptions;
pub use crate::options::{Binding, DType, Options};

/// The C library's version (`pipec_version`).
pub fn version() -> String {
    unsafe { text(sys::pipec_version()) }
}

/// Refuses a library of another ABI than the one `sys` declares.
fn check_abi() -> Result<()> {
    let abi = unsafe { sys::pipec_abi_version() };
    if abi == sys::PIPEC_ABI_VERSION {
        return Ok(());
    }
    Err(Error {
        kind: ErrorKind::Unsupported,
        message: format!(
            "the pipec C library {} has ABI version {abi}; this crate declares version {}",
            version(),
            sys::PIPEC_ABI_VERSION
        ),
    })
}

/// Where a buffer lives: its device address, size and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    pub pointer: sys::CUdeviceptr,
    pub bytes: usize,
    pub dtype: DType,
}

/// The outcome of [`Pipeline::verify`]: eager steps against graph replays, bit for bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub ok: bool,
    pub buffers: usize,
    pub mismatches: usize,
    /// The first mismatch, as `piperun --verify` describes it ("" when ok).
    pub first: String,
}

/// How a GEMM node's cuBLASLt algorithm was chosen at open (`pipec_gemm_at`): the one the
/// bundle stores (`pipec build --gemm-algorithms`), or the heuristic's, and `why` in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GemmChoice {
    pub node: String,
    pub stored: bool,
    pub why: String,
}

/// One file of an in-memory bundle (`manifest.json`, `plan.json`, `modules/0.sm_90.cubin`, ...).
#[derive(Clone, Copy, Debug)]
pub struct BundleFile<'a> {
    pub path: &'a str,
    pub data: &'a [u8],
}

/// An open pipeline: its buffers allocated and initialised, the step's graph built and
/// instantiated. Closed (everything it owns freed) on `Drop`, or by [`Pipeline::close`], which
/// also reports a failure.
pub struct Pipeline {
    raw: NonNull<sys::pipec_pipeline>,
}

// The C library lets any thread call into a pipeline, one call at a time: `&mut self` and the
// absence of `Sync` give exactly that.
unsafe impl Send for Pipeline {}

impl Pipeline {
    /// Opens the bundle in folder `dir` (what `pipec build FILE -o DIR` wrote).
    pub fn open_dir(dir: impl AsRef<Path>, options: &Options) -> Result<Pipeline> {
        check_abi()?;
        let dir = c_path(dir.as_ref())?;
        let raw = RawOptions::new(options)?;
        let mut out = ptr::null_mut();
        Pipeline::opened(unsafe { sys::pipec_open_dir(dir.as_ptr(), &raw.raw, &mut out) }, out)
    }

    /// Opens a bundle held in memory, one entry per file; the library copies what it keeps.
    pub fn open_memory(files: &[BundleFile<'_>], options: &Options) -> Result<Pipeline> {
        check_abi()?;
        let paths = files.iter().map(|f| c_string("the bundle path", f.path.as_bytes())).collect::<Result<Vec<_>>>()?;
        let table: Vec<sys::pipec_file> = files
            .iter()
            .zip(&paths)
            .map(|(f, path)| sys::pipec_file { path: path.as_ptr(), data: f.data.as_ptr().cast(), size: f.data.len() })
            .collect();
        let raw = RawOptions::new(options)?;
        let mut out = ptr::null_mut();
        let status = unsafe { sys::pipec_open_memory(table.as_ptr(), table.len(), &raw.raw, &mut out) };
        Pipeline::opened(status, out)
    }

    fn opened(status: sys::pipec_status, out: *mut sys::pipec_pipeline) -> Result<Pipeline> {
        check(status)?;
        NonNull::new(out).map(|raw| Pipeline { raw }).ok_or_else(|| Error {
            kind: ErrorKind::Other(status),
            message: "the pipec C library reported success and gave no pipeline".to_string(),
        })
    }

    pub(crate) fn ptr(&self) -> *mut sys::pipec_pipeline {
        self.raw.as_ptr()
    }

    /// Enqueues `n` replays of the step on the pipeline's stream (asynchronous).
    pub fn step(&mut self, n: u64) -> Result<()> {
        check(unsafe { sys::pipec_step(self.ptr(), n) })
    }

    /// Enqueues `n` replays ordered after the work enqueued on `stream` so far.
    ///
    /// # Safety
    /// `stream` is a valid stream of the pipeline's context.
    pub unsafe fn launch(&mut self, stream: sys::CUstream, n: u64) -> Result<()> {
        check(sys::pipec_launch(self.ptr(), stream, n))
    }

    /// Waits for everything the pipeline enqueued.
    pub fn synchronize(&mut self) -> Result<()> {
        check(unsafe { sys::pipec_synchronize(self.ptr()) })
    }

    /// The stream the pipeline enqueues on.
    pub fn stream(&self) -> sys::CUstream {
        unsafe { sys::pipec_stream(self.ptr()) }
    }

    /// A labelled diagnostic, read from mapped memory without a synchronise.
    pub fn read_diag(&self, label: &str) -> Result<f64> {
        let label = c_string("the label", label.as_bytes())?;
        let mut value = 0.0;
        check(unsafe { sys::pipec_read_diag(self.ptr(), label.as_ptr(), &mut value) })?;
        Ok(value)
    }

    /// Every labelled diagnostic, in piperun's order, with its value now.
    pub fn diagnostics(&self) -> Result<Vec<(String, f64)>> {
        let count = unsafe { sys::pipec_diag_count(self.ptr()) };
        (0..count)
            .map(|index| {
                let (mut label, mut value) = (ptr::null(), 0.0);
                check(unsafe { sys::pipec_diag_at(self.ptr(), index, &mut label, &mut value) })?;
                Ok((unsafe { text(label) }, value))
            })
            .collect()
    }

    /// A buffer's address, size and type.
    pub fn buffer(&self, name: &str) -> Result<BufferInfo> {
        let name = c_string("the buffer name", name.as_bytes())?;
        let (mut pointer, mut bytes, mut dtype) = (0, 0, 0);
        check(unsafe { sys::pipec_buffer(self.ptr(), name.as_ptr(), &mut pointer, &mut bytes, &mut dtype) })?;
        let dtype = DType::from_raw(dtype).ok_or_else(|| Error {
            kind: ErrorKind::Unsupported,
            message: format!(
                "buffer `{}` has element type code {dtype}, which this crate does not know",
                name.to_string_lossy()
            ),
        })?;
        Ok(BufferInfo { pointer, bytes, dtype })
    }

    /// Every buffer's name, in the plan's order.
    pub fn buffer_names(&self) -> Vec<String> {
        let count = unsafe { sys::pipec_buffer_count(self.ptr()) };
        (0..count).map(|i| unsafe { text(sys::pipec_buffer_name(self.ptr(), i)) }).collect()
    }

    /// A host copy of a buffer, after everything enqueued so far (`out` is its size).
    pub fn read_buffer(&mut self, name: &str, out: &mut [u8]) -> Result<()> {
        let name = c_string("the buffer name", name.as_bytes())?;
        check(unsafe { sys::pipec_read_buffer(self.ptr(), name.as_ptr(), out.as_mut_ptr().cast(), out.len()) })
    }

    /// Overwrites a buffer with `data` (its size), after everything enqueued so far.
    pub fn write_buffer(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let name = c_string("the buffer name", name.as_bytes())?;
        check(unsafe { sys::pipec_write_buffer(self.ptr(), name.as_ptr(), data.as_ptr().cast(), data.len()) })
    }

    /// A live update from the plan of the same file with new constants (`pipec --emit plan -D`);
    /// the count of kernel nodes changed.
    pub fn update_plan(&mut self, plan_json: &str) -> Result<usize> {
        let mut changed = 0;
        check(unsafe { sys::pipec_update_plan(self.ptr(), plan_json.as_ptr().cast(), plan_json.len(), &mut changed) })?;
        Ok(changed)
    }

    /// The step's nodes launched one by one, `n` times.
    pub fn run_eager(&mut self, n: u64) -> Result<()> {
        check(unsafe { sys::pipec_run_eager(self.ptr(), n) })
    }

    /// `piperun --verify steps`: eager steps against graph replays from one state.
    pub fn verify(&mut self, steps: u64) -> Result<VerifyReport> {
        let mut report = sys::pipec_verify_report {
            version: sys::PIPEC_OPTIONS_VERSION,
            ok: 0,
            buffers: 0,
            mismatches: 0,
            first: [0; 1024],
        };
        check(unsafe { sys::pipec_verify(self.ptr(), steps, &mut report) })?;
        let first = unsafe { text(report.first.as_ptr()) };
        Ok(VerifyReport { ok: report.ok != 0, buffers: report.buffers, mismatches: report.mismatches, first })
    }

    /// Saves every buffer in the Python runtime's format (`dir/state.safetensors`).
    pub fn save_state(&mut self, dir: impl AsRef<Path>, steps: u64) -> Result<()> {
        let dir = c_path(dir.as_ref())?;
        check(unsafe { sys::pipec_save_state(self.ptr(), dir.as_ptr(), steps) })
    }

    /// Loads a state the Python runtime or `save_state` wrote.
    pub fn load_state(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = c_path(dir.as_ref())?;
        check(unsafe { sys::pipec_load_state(self.ptr(), dir.as_ptr()) })
    }

    /// Adds the step's nodes into the host's graph after `deps`; with `last`, an empty node
    /// after every last node of the step, for the host's next node to depend on.
    ///
    /// # Safety
    /// `graph` is a valid graph of the pipeline's context and `deps` are nodes of it; the
    /// graph's executables run only while the pipeline is open.
    pub unsafe fn add_to_graph(
        &mut self,
        graph: sys::CUgraph,
        deps: &[sys::CUgraphNode],
        last: bool,
    ) -> Result<Option<sys::CUgraphNode>> {
        let mut out = ptr::null_mut();
        let out_last = if last { &mut out as *mut sys::CUgraphNode } else { ptr::null_mut() };
        check(sys::pipec_add_to_graph(self.ptr(), graph, deps.as_ptr(), deps.len(), out_last))?;
        Ok(if last { Some(out) } else { None })
    }

    /// How each GEMM node's algorithm was chosen, in the order the nodes were prepared: whether
    /// the algorithms the bundle stores took effect on this GPU, and why not where they did not.
    pub fn gemm_choices(&self) -> Result<Vec<GemmChoice>> {
        let count = unsafe { sys::pipec_gemm_count(self.ptr()) };
        (0..count)
            .map(|index| {
                let (mut node, mut stored, mut why) = (ptr::null(), 0, ptr::null());
                check(unsafe { sys::pipec_gemm_at(self.ptr(), index, &mut node, &mut stored, &mut why) })?;
                Ok(GemmChoice { node: unsafe { text(node) }, stored: stored != 0, why: unsafe { text(why) } })
            })
            .collect()
    }

    /// Waits for the pipeline's work and frees it, reporting a failure (`Drop` cannot).
    pub fn close(self) -> Result<()> {
        let raw = self.ptr();
        std::mem::forget(self);
        check(unsafe { sys::pipec_close(raw) })
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // A failure to close cannot be returned from here; `close` reports it.
        unsafe { sys::pipec_close(self.ptr()) };
    }
}

#[cfg(test)]
mod tests;
