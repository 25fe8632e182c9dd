//! The safe wrapper over the real C runtime, on the C runtime's fake CUDA driver
//! (native/tests/fake_cuda.c, built with the library by build.rs): bundles built by `pipec build`
//! (the `pipec` on the PATH, or $PIPEC) open from a folder and from memory, step, read back,
//! and report each failure as one line of its kind; closing or dropping a pipeline, and every
//! failed open, leave nothing allocated in the driver.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use pipec::plan::PlanSummary;
use pipec::{Binding, BundleFile, DType, ErrorKind, GemmChoice, Options, Pipeline, Value};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../..");

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

fn fake_driver() -> &'static str {
    env!(
        "PIPEC_FAKE_DRIVER",
        "build.rs found no fake driver: let it build the library with CMake, or set PIPEC_FAKE_DRIVER"
    )
}

/// The fake driver's state is the process's: one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the fake driver still holds: allocations, graphs, executables, modules, streams, events.
fn live() -> [c_int; 6] {
    let path = CString::new(fake_driver()).unwrap();
    let mut counts = [0; 6];
    unsafe {
        let library = dlopen(path.as_ptr(), 2);
        assert!(!library.is_null(), "the fake driver loads");
        let symbol = dlsym(library, c"fake_cuda_live".as_ptr());
        assert!(!symbol.is_null(), "the fake driver exports fake_cuda_live");
        let fake_cuda_live: unsafe extern "C" fn(*mut c_int) = std::mem::transmute_copy(&symbol);
        fake_cuda_live(counts.as_mut_ptr());
    }
    counts
}

fn options() -> Options {
    Options::default().driver_library(fake_driver())
}

/// rl_step's bundle, built once per run of these tests.
fn rl_step() -> &'static Path {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rl_step.bundle");
        let pipec = std::env::var("PIPEC").unwrap_or_else(|_| "pipec".to_string());
        let status = Command::new(&pipec)
            .arg("build")
            .arg(Path::new(ROOT).join("pipelines/rl_step.pipe"))
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("cannot run `{pipec}`: {e}"));
        assert!(status.success(), "`pipec build` builds rl_step");
        out
    })
}

fn plan() -> PlanSummary {
    PlanSummary::from_json(&std::fs::read_to_string(rl_step().join("plan.json")).unwrap()).unwrap()
}

#[test]
fn a_bundle_opens_steps_and_reads_back_what_the_plan_says() {
    let _serial = serial();
    let plan = plan();
    let mut pipeline = Pipeline::open_dir(rl_step(), &options()).unwrap();
    let names: Vec<String> = plan.buffers.iter().map(|b| b.name.clone()).collect();
    assert_eq!(pipeline.buffer_names(), names);
    let diag = pipeline.buffer("diag").unwrap();
    assert_eq!((diag.bytes, diag.dtype), (32, DType::F32));
    pipeline.step(3).unwrap();
    pipeline.synchronize().unwrap();
    let labels: Vec<String> = pipeline.diagnostics().unwrap().into_iter().map(|(label, _)| label).collect();
    let expected: Vec<String> = plan.diagnostic_labels().into_iter().map(|(label, _)| label).collect();
    assert_eq!(labels, expected);
    let mut bytes = vec![0u8; 32];
    pipeline.read_buffer("diag", &mut bytes).unwrap();
    let first = f32::from_le_bytes(bytes[..4].try_into().unwrap()) as f64;
    assert_eq!(pipeline.read_diag(&labels[0]).unwrap(), first, "a diagnostic is its buffer's element");
    pipeline.close().unwrap();
    assert_eq!(live(), [0; 6], "close frees everything");
}

#[test]
fn drop_frees_what_the_pipeline_holds() {
    let _serial = serial();
    let pipeline = Pipeline::open_dir(rl_step(), &options()).unwrap();
    assert_ne!(live(), [0; 6]);
    drop(pipeline);
    assert_eq!(live(), [0; 6]);
}

#[test]
fn a_bundle_opens_from_memory() {
    let _serial = serial();
    let paths: Vec<String> =
        walk(rl_step()).into_iter().map(|p| p.strip_prefix(rl_step()).unwrap().to_str().unwrap().to_string()).collect();
    let data: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(rl_step().join(p)).unwrap()).collect();
    let files: Vec<BundleFile> = paths.iter().zip(&data).map(|(path, data)| BundleFile { path, data }).collect();
    let mut pipeline = Pipeline::open_memory(&files, &options()).unwrap();
    drop(data); // the library copied what it keeps
    pipeline.step(1).unwrap();
    assert_eq!(pipeline.diagnostics().unwrap().len(), plan().diagnostic_labels().len());
    pipeline.close().unwrap();
    assert_eq!(live(), [0; 6]);
}

fn walk(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path))
        } else {
            found.push(path)
        }
    }
    found.sort();
    found
}

#[test]
fn a_wrong_call_is_one_line_of_its_kind() {
    let _serial = serial();
    let mut pipeline = Pipeline::open_dir(rl_step(), &options()).unwrap();
    let error = pipeline.read_buffer("diag", &mut [0u8; 4]).unwrap_err();
    assert!(error.message.contains("diag") && !error.message.contains('\n'), "{error}");
    let error = pipeline.buffer("no_such_buffer").unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("no_such_buffer") && !error.message.contains('\n'), "{error}");
    assert!(pipeline.read_diag("no_such_label").is_err());
}

#[test]
fn a_binding_of_the_wrong_size_is_refused_and_leaks_nothing() {
    let _serial = serial();
    let binding = Binding { buffer: "diag".into(), pointer: 0x10000, bytes: 4, dtype: DType::F32 };
    let refused = unsafe { options().bind(binding) };
    let error = Pipeline::open_dir(rl_step(), &refused).err().expect("a mapped buffer of 32 bytes, bound with 4");
    assert_eq!(error.kind, ErrorKind::Bind);
    assert!(error.message.contains("diag") && !error.message.contains('\n'), "{error}");
    assert_eq!(live(), [0; 6], "a failed open leaks nothing");
}

#[test]
fn a_damaged_bundle_is_refused_naming_the_file() {
    let _serial = serial();
    let damaged = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("damaged.bundle");
    std::fs::remove_dir_all(&damaged).ok();
    std::fs::create_dir_all(damaged.join("modules")).unwrap();
    for path in walk(rl_step()) {
        let target = damaged.join(path.strip_prefix(rl_step()).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&path, &target).unwrap();
    }
    let cubin = damaged.join("modules/0.sm_90.cubin");
    let data = std::fs::read(&cubin).unwrap();
    std::fs::write(&cubin, &data[..data.len() / 2]).unwrap();
    let error = Pipeline::open_dir(&damaged, &options()).err().expect("a truncated cubin");
    assert_eq!(error.kind, ErrorKind::Bundle);
    assert!(error.message.contains("modules/0.sm_90.cubin") && !error.message.contains('\n'), "{error}");
    assert_eq!(live(), [0; 6]);
}

fn fake_cublaslt() -> &'static str {
    env!("PIPEC_FAKE_CUBLASLT", "build.rs found no fake cuBLASLt: let it build the library with CMake")
}

#[test]
fn a_bundle_says_how_each_gemm_algorithm_was_chosen() {
    let _serial = serial();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gemm_mlp.bundle");
    let pipec = std::env::var("PIPEC").unwrap_or_else(|_| "pipec".to_string());
    let status = Command::new(&pipec)
        .arg("build")
        .arg(Path::new(ROOT).join("pipelines/examples/gemm_mlp.pipe"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{pipec}`: {e}"));
    assert!(status.success(), "`pipec build` builds gemm_mlp");
    let pipeline = Pipeline::open_dir(&out, &options().cublaslt_library(fake_cublaslt())).unwrap();
    let choices = pipeline.gemm_choices().unwrap();
    let why = "heuristic: the bundle stores no GEMM algorithms";
    let nodes = ["forward/gemm:h", "forward/gemm:y", "backward/gemm:dw2", "backward/gemm:dh", "backward/gemm:dw1"];
    let expected: Vec<GemmChoice> = nodes
        .iter()
        .map(|node| GemmChoice { node: format!("step/{node}"), stored: false, why: why.to_string() })
        .collect();
    assert_eq!(choices, expected);
    assert_eq!(pipec::report::gemm_summary(&choices), "heuristic: the bundle stores no GEMM algorithms: all 5 nodes");
    pipeline.close().unwrap();
    assert_eq!(live(), [0; 6]);
}

fn fake_nccl() -> &'static str {
    env!("PIPEC_FAKE_NCCL", "build.rs found no fake NCCL: let it build the library with CMake")
}

/// A symbol of the fake NCCL (native/tests/fake_nccl.c).
unsafe fn nccl_symbol(name: &std::ffi::CStr) -> *mut c_void {
    let path = CString::new(fake_nccl()).unwrap();
    let library = dlopen(path.as_ptr(), 2 /* RTLD_NOW */);
    assert!(!library.is_null(), "the fake NCCL loads");
    let symbol = dlsym(library, name.as_ptr());
    assert!(!symbol.is_null(), "the fake NCCL exports {name:?}");
    symbol
}

/// A communicator of the fake NCCL, rank `rank` of `size`, as a host creates it.
fn communicator(rank: c_int, size: c_int) -> *mut c_void {
    unsafe {
        let get_id: unsafe extern "C" fn(*mut [u8; 128]) -> c_int =
            std::mem::transmute(nccl_symbol(c"ncclGetUniqueId"));
        let init: unsafe extern "C" fn(*mut *mut c_void, c_int, [u8; 128], c_int) -> c_int =
            std::mem::transmute(nccl_symbol(c"ncclCommInitRank"));
        let mut id = [0u8; 128];
        let mut comm = std::ptr::null_mut();
        assert_eq!((get_id(&mut id), init(&mut comm, size, id, rank)), (0, 0), "the fake NCCL makes a communicator");
        comm
    }
}

fn destroy(comm: *mut c_void) {
    unsafe {
        let destroy: unsafe extern "C" fn(*mut c_void) -> c_int = std::mem::transmute(nccl_symbol(c"ncclCommDestroy"));
        destroy(comm);
    }
}

/// tests/fixtures/runtime/collectives.pipe's bundle for rank 0 of 2.
fn collectives() -> &'static Path {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("collectives.bundle");
        let pipec = std::env::var("PIPEC").unwrap_or_else(|_| "pipec".to_string());
        let status = Command::new(&pipec)
            .arg("build")
            .arg(Path::new(ROOT).join("tests/fixtures/runtime/collectives.pipe"))
            .args(["-D", "RANK=0", "-D", "WORLD_SIZE=2", "-o"])
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("cannot run `{pipec}`: {e}"));
        assert!(status.success(), "`pipec build` builds the collectives fixture");
        out
    })
}

#[test]
fn collectives_run_over_the_hosts_communicator_and_each_failure_is_one_line_of_its_kind() {
    let _serial = serial();
    let comm = communicator(0, 2);
    let with = |comm| unsafe { options().nccl_library(fake_nccl()).nccl_comm(comm).nccl_timeout(0.2) };
    let mut pipeline = Pipeline::open_dir(collectives(), &with(comm)).unwrap();
    pipeline.step(1).unwrap();
    pipeline.synchronize().unwrap();
    let mut x = [0u8; 4 * 4096];
    pipeline.read_buffer("x", &mut x).unwrap();
    assert!(x.chunks(4).all(|v| f32::from_le_bytes(v.try_into().unwrap()) == 2.0), "1.0 summed over two ranks");
    pipeline.close().unwrap();
    destroy(comm);

    let wrong = communicator(1, 2);
    let error = Pipeline::open_dir(collectives(), &with(wrong)).err().expect("rank 1's communicator, rank 0's bundle");
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("was built for rank 0 of 2, and the host's communicator is rank 1 of 2"), "{error}");
    destroy(wrong);

    let stalls = communicator(0, 2);
    let run: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(nccl_symbol(c"fake_nccl_kernels")) };
    std::env::set_var("FAKE_NCCL_STALL_AT", (unsafe { run() } + 1).to_string()); // the check at open
    let error = Pipeline::open_dir(collectives(), &with(stalls)).err().expect("a rank that never joins the check");
    std::env::remove_var("FAKE_NCCL_STALL_AT");
    assert_eq!(error.kind, ErrorKind::Collective); // pipec aborted the communicator: not destroyed here
    assert!(error.message.ends_with("; the NCCL communicator is aborted") && !error.message.contains('\n'), "{error}");
    assert_eq!(live(), [0; 6]);
}

#[test]
fn constants_change_in_place_from_the_record_all_or_nothing() {
    let _serial = serial();
    let mut pipeline = Pipeline::open_dir(rl_step(), &options()).unwrap();
    let gamma = pipeline.constant("GAMMA").unwrap();
    assert_eq!((gamma.value, gamma.structural), (Value::Float(0.99), None));
    assert_eq!(pipeline.update_constants(&[("GAMMA", 0.95.into()), ("TD_SPB", Value::Int(2))]).unwrap(), 2);
    assert_eq!(pipeline.constant("GAMMA").unwrap().value, Value::Float(0.95));
    pipeline.step(1).unwrap();

    let lr = pipeline.constant("LR").unwrap().structural.expect("LR reaches the init block");
    let error = pipeline.update_constants(&[("LR", 5e-4.into())]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::UpdateRefused);
    assert_eq!(
        error.message,
        format!(
            "`LR` cannot change in place: it {lr}; only constants that reach kernel scalar \
        arguments and launch shapes can (rebuild with `-D LR=...`)"
        )
    );
    let error = pipeline.update_constants(&[("GAMMA", 0.9.into()), ("TD_SPB", Value::Float(2.5))]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::UpdateRefused, "a float where the grid needs an integer");
    assert!(error.message.starts_with("GAMMA = 0.9, TD_SPB = 2.5: ") && !error.message.contains('\n'), "{error}");
    assert_eq!(pipeline.constant("GAMMA").unwrap().value, Value::Float(0.95), "a refusal changes nothing");
    let error = pipeline.update_constants(&[("NO_SUCH", Value::Bool(true))]).unwrap_err();
    assert!(
        error.kind == ErrorKind::InvalidArgument && error.message.ends_with("has no constant `NO_SUCH`"),
        "{error}"
    );
    pipeline.close().unwrap();
    assert_eq!(live(), [0; 6]);
}
