//! `run_bundle DIR [--steps N] [--log-every K] [--save-state DIR]`: piperun's replay loop in
//! Rust, over pipec's C runtime. It opens a bundle (`pipec build pipelines/rl_step.pipe -o
//! rl_step.bundle`), replays the step N times (default 1000), waits for an event and reads the
//! mapped diagnostics every K steps (default 500), between replays as piperun does, prints
//! piperun's summary and diagnostics lines (runtime/cli.py) for the same run, and saves the
//! state in the Python runtime's format, as `piperun --save-state` does. A bundle with GEMM nodes
//! first gets piperun's line saying whether their stored algorithms took effect:
//!
//!     run_bundle: GEMM algorithms: stored (tune): all 14 nodes
//!     run_bundle: ran 1000 steps in 0.034 s: 29411.76 steps/s, 33.1 us of GPU time per step (graph)
//!     run_bundle: step=1000 mean_return_100=21.5 episodes=1.2e+04 loss=0.01234 ...
//!
//! The GPU time comes from CUDA events on the pipeline's stream, as piperun measures it: the
//! example loads the driver itself (dlopen, as the C library does; nothing to link), retains
//! device 0's primary context, hands it to the pipeline (`Options::context`) and makes it
//! current on its own thread for the events.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::process::ExitCode;
use std::time::Instant;

use pipec::plan::PlanSummary;
use pipec::report::{self, Value};
use pipec::sys::{CUcontext, CUstream};
use pipec::{Options, Pipeline};

const PROG: &str = "run_bundle";

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type CuEvent = *mut c_void;

/// The few driver entry points the example calls, found by name in libcuda.
struct Driver {
    init: unsafe extern "C" fn(c_uint) -> c_int,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    primary_retain: unsafe extern "C" fn(*mut CUcontext, c_int) -> c_int,
    primary_release: unsafe extern "C" fn(c_int) -> c_int,
    push_current: unsafe extern "C" fn(CUcontext) -> c_int,
    pop_current: unsafe extern "C" fn(*mut CUcontext) -> c_int,
    event_create: unsafe extern "C" fn(*mut CuEvent, c_uint) -> c_int,
    event_record: unsafe extern "C" fn(CuEvent, CUstream) -> c_int,
    event_synchronize: unsafe extern "C" fn(CuEvent) -> c_int,
    event_elapsed: unsafe extern "C" fn(*mut f32, CuEvent, CuEvent) -> c_int,
    event_destroy: unsafe extern "C" fn(CuEvent) -> c_int,
}

impl Driver {
    fn load() -> Result<Driver, String> {
        let path = std::env::var("PIPEC_DRIVER_LIBRARY").unwrap_or_else(|_| "libcuda.so.1".to_string());
        let name = CString::new(path.clone()).map_err(|_| "PIPEC_DRIVER_LIBRARY holds a NUL byte".to_string())?;
        let library = unsafe { dlopen(name.as_ptr(), RTLD_NOW) };
        if library.is_null() {
            return Err(format!("no CUDA driver: cannot load {path}"));
        }
        // Safety: each type below is the one cuda.h declares for the entry point.
        unsafe {
            Ok(Driver {
                init: function(library, &path, "cuInit")?,
                device_get: function(library, &path, "cuDeviceGet")?,
                primary_retain: function(library, &path, "cuDevicePrimaryCtxRetain")?,
                // cuda.h names the _v2 entry points by #define (cuDevicePrimaryCtxRelease, ...)
                primary_release: function(library, &path, "cuDevicePrimaryCtxRelease_v2")?,
                push_current: function(library, &path, "cuCtxPushCurrent_v2")?,
                pop_current: function(library, &path, "cuCtxPopCurrent_v2")?,
                event_create: function(library, &path, "cuEventCreate")?,
                event_record: function(library, &path, "cuEventRecord")?,
                event_synchronize: function(library, &path, "cuEventSynchronize")?,
                event_elapsed: function(library, &path, "cuEventElapsedTime")?,
                event_destroy: function(library, &path, "cuEventDestroy_v2")?,
            })
        }
    }
}

/// The entry point `name` of a loaded library, as a function pointer of type `F`.
///
/// # Safety
/// `F` is the type of the function the library exports under that name.
unsafe fn function<F>(library: *mut c_void, path: &str, name: &str) -> Result<F, String> {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>(), "F is a function pointer");
    let c_name = CString::new(name).expect("entry point names hold no NUL");
    let found = dlsym(library, c_name.as_ptr());
    if found.is_null() {
        return Err(format!("{path} has no {name}"));
    }
    Ok(std::mem::transmute_copy::<*mut c_void, F>(&found))
}

fn cuda(result: c_int, call: &str) -> Result<(), String> {
    if result == 0 {
        Ok(())
    } else {
        Err(format!("{call} failed with CUDA error {result}"))
    }
}

struct Arguments {
    bundle: String,
    steps: u64,
    log_every: u64,
    save_state: Option<String>,
}

const USAGE: &str = "usage: run_bundle DIR [--steps N] [--log-every K] [--save-state DIR]";

fn arguments() -> Result<Arguments, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Arguments { bundle: String::new(), steps: 1000, log_every: 500, save_state: None };
    while let Some(arg) = args.next() {
        let mut value = |option: &str| args.next().ok_or(format!("{option} takes a value ({USAGE})"));
        match arg.as_str() {
            "--steps" => parsed.steps = number("--steps", &value("--steps")?)?,
            "--log-every" => parsed.log_every = number("--log-every", &value("--log-every")?)?.max(1),
            "--save-state" => parsed.save_state = Some(value("--save-state")?),
            _ if parsed.bundle.is_empty() && !arg.starts_with('-') => parsed.bundle = arg,
            _ => return Err(format!("unexpected argument `{arg}` ({USAGE})")),
        }
    }
    if parsed.bundle.is_empty() {
        return Err(format!("give the bundle's folder ({USAGE})"));
    }
    Ok(parsed)
}

fn number(option: &str, text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("{option} takes a whole number, not `{text}`"))
}

fn main() -> ExitCode {
    match arguments().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{PROG}: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Arguments) -> Result<(), String> {
    let driver = Driver::load()?;
    let mut context: CUcontext = std::ptr::null_mut();
    let mut device = 0;
    unsafe {
        cuda((driver.init)(0), "cuInit")?;
        cuda((driver.device_get)(&mut device, 0), "cuDeviceGet")?;
        cuda((driver.primary_retain)(&mut context, device), "cuDevicePrimaryCtxRetain")?;
    }
    // The events below are made in the pipeline's context: current on this thread meanwhile.
    let result = unsafe { cuda((driver.push_current)(context), "cuCtxPushCurrent") }.and_then(|()| {
        let replayed = replay(&driver, context, args);
        let mut popped: CUcontext = std::ptr::null_mut();
        unsafe { (driver.pop_current)(&mut popped) };
        replayed
    });
    unsafe { (driver.primary_release)(device) };
    result
}

fn replay(driver: &Driver, context: CUcontext, args: &Arguments) -> Result<(), String> {
    // The context is retained above until the pipeline is closed, at the end of this function.
    let options = unsafe { Options::default().context(context) };
    let plan_path = std::path::Path::new(&args.bundle).join("plan.json");
    let plan = std::fs::read_to_string(&plan_path).map_err(|e| format!("cannot read {}: {e}", plan_path.display()))?;
    let plan = PlanSummary::from_json(&plan).map_err(|e| e.to_string())?;
    let mut pipeline = Pipeline::open_dir(&args.bundle, &options).map_err(|e| e.to_string())?;
    let choices = pipeline.gemm_choices().map_err(|e| e.to_string())?;
    if !choices.is_empty() {
        println!("{PROG}: GEMM algorithms: {}", report::gemm_summary(&choices));
    }
    let mut events: [CuEvent; 2] = [std::ptr::null_mut(); 2];
    for event in events.iter_mut() {
        unsafe { cuda((driver.event_create)(event, 0), "cuEventCreate")? };
    }
    let stream = pipeline.stream();
    let start = Instant::now();
    unsafe { cuda((driver.event_record)(events[0], stream), "cuEventRecord")? };
    let mut done = 0;
    let mut readback = Vec::new();
    while done < args.steps {
        let chunk = ((done / args.log_every + 1) * args.log_every).min(args.steps) - done;
        pipeline.step(chunk).map_err(|e| e.to_string())?;
        done += chunk;
        unsafe {
            cuda((driver.event_record)(events[1], stream), "cuEventRecord")?;
            cuda((driver.event_synchronize)(events[1]), "cuEventSynchronize")?; // between replays
        }
        readback = values(&pipeline, &plan)?;
    }
    let wall = start.elapsed().as_secs_f64();
    let mut gpu_ms = 0.0f32;
    if done > 0 {
        unsafe { cuda((driver.event_elapsed)(&mut gpu_ms, events[0], events[1]), "cuEventElapsedTime")? };
    }
    for event in events {
        unsafe { (driver.event_destroy)(event) };
    }
    println!("{}", report::summary(PROG, done, wall, gpu_ms as f64, "graph"));
    if done == 0 {
        readback = values(&pipeline, &plan)?;
    }
    if !readback.is_empty() {
        println!("{PROG}: {}", report::short(&readback));
    }
    if let Some(folder) = &args.save_state {
        // piperun's --save-state: the Python runtime's format, so the two states compare
        pipeline.save_state(folder, done).map_err(|e| e.to_string())?;
        println!("{PROG}: saved state after step {done} to {folder}/state.safetensors");
    }
    pipeline.close().map_err(|e| e.to_string())
}

/// The labelled diagnostics now, typed by the bundle's plan.
fn values(pipeline: &Pipeline, plan: &PlanSummary) -> Result<Vec<Value>, String> {
    Ok(report::values(&pipeline.diagnostics().map_err(|e| e.to_string())?, plan))
}
