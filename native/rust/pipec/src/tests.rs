//! The wrapper's own logic, without a GPU: the declarations against the header (a C program
//! compiled with the system compiler prints the header's sizes, offsets and constants), the
//! options' ownership of what they point to, and the errors found before or by the library.

use super::*;
use crate::options::DTYPES;
use std::ffi::CStr;
use std::mem::{offset_of, size_of};
use std::process::Command;

const HEADER_FOLDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");

/// `name value` lines from a C program that includes pipec.h.
fn header_facts() -> Vec<(String, i64)> {
    let folder = std::env::temp_dir().join(format!("pipec-layout-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let source = folder.join("layout.c");
    let program = folder.join("layout");
    let mut text = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"pipec.h\"\nint main(void) {\n");
    for (name, expression) in C_FACTS {
        text += &format!("    printf(\"{name} %lld\\n\", (long long)({expression}));\n");
    }
    text += "    return 0;\n}\n";
    std::fs::write(&source, text).unwrap();
    let compiled = Command::new("cc")
        .arg("-std=c11")
        .arg("-I")
        .arg(HEADER_FOLDER)
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .status()
        .expect("the system C compiler `cc` runs");
    assert!(compiled.success(), "pipec.h compiles in C11");
    let output = Command::new(&program).output().unwrap();
    std::fs::remove_dir_all(&folder).ok();
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (name, value) = line.split_once(' ').unwrap();
            (name.to_string(), value.parse().unwrap())
        })
        .collect()
}

const C_FACTS: &[(&str, &str)] = &[
    ("options_size", "sizeof(pipec_options)"),
    ("options_device", "offsetof(pipec_options, device)"),
    ("options_context", "offsetof(pipec_options, context)"),
    ("options_stream", "offsetof(pipec_options, stream)"),
    ("options_bindings", "offsetof(pipec_options, bindings)"),
    ("options_binding_count", "offsetof(pipec_options, binding_count)"),
    ("options_nccl_comm", "offsetof(pipec_options, nccl_comm)"),
    ("options_driver_library", "offsetof(pipec_options, driver_library)"),
    ("options_cublaslt_library", "offsetof(pipec_options, cublaslt_library)"),
    ("binding_size", "sizeof(pipec_binding)"),
    ("binding_pointer", "offsetof(pipec_binding, pointer)"),
    ("binding_bytes", "offsetof(pipec_binding, bytes)"),
    ("binding_dtype", "offsetof(pipec_binding, dtype)"),
    ("file_size", "sizeof(pipec_file)"),
    ("file_data", "offsetof(pipec_file, data)"),
    ("file_size_field", "offsetof(pipec_file, size)"),
    ("report_size", "sizeof(pipec_verify_report)"),
    ("report_ok", "offsetof(pipec_verify_report, ok)"),
    ("report_buffers", "offsetof(pipec_verify_report, buffers)"),
    ("report_mismatches", "offsetof(pipec_verify_report, mismatches)"),
    ("report_first", "offsetof(pipec_verify_report, first)"),
    ("status_size", "sizeof(pipec_status)"),
    ("dtype_size", "sizeof(pipec_dtype)"),
    ("abi", "PIPEC_ABI_VERSION"),
    ("bundle_format", "PIPEC_BUNDLE_FORMAT_VERSION"),
    ("options_version", "PIPEC_OPTIONS_VERSION"),
    ("options_nccl_library", "offsetof(pipec_options, nccl_library)"),
    ("options_nccl_timeout_s", "offsetof(pipec_options, nccl_timeout_s)"),
    ("last_status", "PIPEC_ERROR_COLLECTIVE"),
    ("bind_status", "PIPEC_ERROR_BIND"),
    ("last_dtype", "PIPEC_U16"),
    ("bf16", "PIPEC_BF16"),
    ("value_size", "sizeof(pipec_value)"),
    ("value_as", "offsetof(pipec_value, as)"),
    ("value_bool", "PIPEC_VALUE_BOOL"),
    ("value_uint", "PIPEC_VALUE_UINT"),
];

#[test]
fn the_declarations_match_the_header() {
    let rust: Vec<(&str, i64)> = vec![
        ("options_size", size_of::<sys::pipec_options>() as i64),
        ("options_device", offset_of!(sys::pipec_options, device) as i64),
        ("options_context", offset_of!(sys::pipec_options, context) as i64),
        ("options_stream", offset_of!(sys::pipec_options, stream) as i64),
        ("options_bindings", offset_of!(sys::pipec_options, bindings) as i64),
        ("options_binding_count", offset_of!(sys::pipec_options, binding_count) as i64),
        ("options_nccl_comm", offset_of!(sys::pipec_options, nccl_comm) as i64),
        ("options_driver_library", offset_of!(sys::pipec_options, driver_library) as i64),
        ("options_cublaslt_library", offset_of!(sys::pipec_options, cublaslt_library) as i64),
        ("binding_size", size_of::<sys::pipec_binding>() as i64),
        ("binding_pointer", offset_of!(sys::pipec_binding, pointer) as i64),
        ("binding_bytes", offset_of!(sys::pipec_binding, bytes) as i64),
        ("binding_dtype", offset_of!(sys::pipec_binding, dtype) as i64),
        ("file_size", size_of::<sys::pipec_file>() as i64),
        ("file_data", offset_of!(sys::pipec_file, data) as i64),
        ("file_size_field", offset_of!(sys::pipec_file, size) as i64),
        ("report_size", size_of::<sys::pipec_verify_report>() as i64),
        ("report_ok", offset_of!(sys::pipec_verify_report, ok) as i64),
        ("report_buffers", offset_of!(sys::pipec_verify_report, buffers) as i64),
        ("report_mismatches", offset_of!(sys::pipec_verify_report, mismatches) as i64),
        ("report_first", offset_of!(sys::pipec_verify_report, first) as i64),
        ("status_size", size_of::<sys::pipec_status>() as i64),
        ("dtype_size", size_of::<sys::pipec_dtype>() as i64),
        ("abi", sys::PIPEC_ABI_VERSION as i64),
        ("bundle_format", sys::PIPEC_BUNDLE_FORMAT_VERSION as i64),
        ("options_version", sys::PIPEC_OPTIONS_VERSION as i64),
        ("options_nccl_library", offset_of!(sys::pipec_options, nccl_library) as i64),
        ("options_nccl_timeout_s", offset_of!(sys::pipec_options, nccl_timeout_s) as i64),
        ("last_status", sys::PIPEC_ERROR_COLLECTIVE as i64),
        ("bind_status", sys::PIPEC_ERROR_BIND as i64),
        ("last_dtype", sys::PIPEC_U16 as i64),
        ("bf16", sys::PIPEC_BF16 as i64),
        ("value_size", size_of::<sys::pipec_value>() as i64),
        ("value_as", offset_of!(sys::pipec_value, as_) as i64),
        ("value_bool", sys::PIPEC_VALUE_BOOL as i64),
        ("value_uint", sys::PIPEC_VALUE_UINT as i64),
    ];
    let c = header_facts();
    assert_eq!(c.len(), rust.len());
    for ((c_name, c_value), (rust_name, rust_value)) in c.iter().zip(&rust) {
        assert_eq!((c_name.as_str(), *c_value), (*rust_name, *rust_value), "sys.rs disagrees with pipec.h");
    }
}

#[test]
fn every_status_has_its_kind_and_unknown_ones_are_kept() {
    let kinds: Vec<ErrorKind> = (1..=12).map(ErrorKind::from_status).collect();
    assert_eq!(
        kinds,
        [
            ErrorKind::InvalidArgument,
            ErrorKind::Io,
            ErrorKind::Bundle,
            ErrorKind::Unsupported,
            ErrorKind::Bind,
            ErrorKind::Cuda,
            ErrorKind::Library,
            ErrorKind::OutOfMemory,
            ErrorKind::UpdateRefused,
            ErrorKind::State,
            ErrorKind::LaunchLimits,
            ErrorKind::Collective
        ]
    );
    assert_eq!(ErrorKind::from_status(42), ErrorKind::Other(42));
}

#[test]
fn dtypes_round_trip_and_know_integers() {
    for (dtype, raw) in DTYPES {
        assert_eq!((dtype.raw(), DType::from_raw(raw)), (raw, Some(dtype)));
    }
    assert_eq!(DType::from_raw(99), None);
    assert!(DType::U32.is_integer() && !DType::BF16.is_integer());
}

#[test]
fn the_raw_options_point_into_what_they_own() {
    let binding = Binding { buffer: "weights".into(), pointer: 0x1000, bytes: 64, dtype: DType::BF16 };
    let options = unsafe { Options::default().device(3).driver_library("/opt/fake/libcuda.so").bind(binding.clone()) };
    let raw = RawOptions::new(&options).unwrap();
    assert_eq!((raw.raw.version, raw.raw.device, raw.raw.binding_count), (sys::PIPEC_OPTIONS_VERSION, 3, 1));
    assert!(raw.raw.context.is_null() && raw.raw.stream.is_null() && raw.raw.cublaslt_library.is_null());
    let first = unsafe { *raw.raw.bindings };
    assert_eq!(unsafe { CStr::from_ptr(first.buffer) }.to_str().unwrap(), "weights");
    assert_eq!((first.pointer, first.bytes, first.dtype), (0x1000, 64, sys::PIPEC_BF16));
    assert_eq!(unsafe { CStr::from_ptr(raw.raw.driver_library) }.to_str().unwrap(), "/opt/fake/libcuda.so");
    let unbound = RawOptions::new(&Options::default()).unwrap();
    assert!(unbound.raw.bindings.is_null() && unbound.raw.binding_count == 0 && unbound.raw.driver_library.is_null());
}

#[test]
fn a_nul_in_a_name_is_refused_before_the_library_sees_it() {
    let options =
        unsafe { Options::default().bind(Binding { buffer: "a\0b".into(), pointer: 0, bytes: 0, dtype: DType::F32 }) };
    let error = RawOptions::new(&options).err().unwrap();
    assert_eq!(
        error,
        Error { kind: ErrorKind::InvalidArgument, message: "the buffer name `a\0b` holds a NUL byte".to_string() }
    );
    let error = Pipeline::open_dir("bundle\0dir", &Options::default()).err().unwrap();
    assert_eq!(
        (error.kind, error.to_string()),
        (ErrorKind::InvalidArgument, "the path `bundle\0dir` holds a NUL byte".to_string())
    );
}

#[test]
fn the_library_is_the_abi_this_crate_declares() {
    assert!(check_abi().is_ok());
    assert!(!version().is_empty());
}

#[test]
fn a_failed_open_is_the_librarys_one_line_and_gives_no_pipeline() {
    let missing = std::env::temp_dir().join(format!("pipec-no-bundle-{}", std::process::id()));
    let error = Pipeline::open_dir(&missing, &Options::default()).err().expect("there is no bundle to open");
    assert!(matches!(error.kind, ErrorKind::Io | ErrorKind::Bundle), "{error:?}");
    assert!(error.message.contains(missing.to_str().unwrap()) && !error.message.contains('\n'), "{error}");
    assert_eq!(unsafe { text(sys::pipec_last_error()) }, error.message, "the message is the thread's last error");
}
