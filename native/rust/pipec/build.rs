//! Links pipec's C runtime, `libpipec_runtime`: from `$PIPEC_LIB_DIR` when set (a prebuilt
//! `libpipec_runtime.a`, else `.so`), else built here from the repository's `native/` folder
//! with CMake (this crate sits in `native/rust/pipec`), together with the fake CUDA driver the
//! tests open pipelines on (`PIPEC_FAKE_DRIVER` for them; `$PIPEC_FAKE_DRIVER` overrides it), the
//! fake cuBLASLt of their GEMM nodes (`PIPEC_FAKE_CUBLASLT`) and the fake NCCL their collectives
//! run on (`PIPEC_FAKE_NCCL`).
//! Only std: a build script may not depend on a crate either, as nothing can be downloaded.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const STATIC: &str = "libpipec_runtime.a";
const SHARED: &str = "libpipec_runtime.so";
const FAKE_DRIVER: &str = "libfake_cuda.so";
const FAKE_NCCL: &str = "libfake_nccl.so";
const FAKE_CUBLASLT: &str = "libfake_cublaslt.so";

fn main() {
    println!("cargo:rerun-if-env-changed=PIPEC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PIPEC_FAKE_DRIVER");
    let folder = match env::var_os("PIPEC_LIB_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => build_with_cmake(),
    };
    println!("cargo:rustc-link-search=native={}", folder.display());
    if folder.join(STATIC).is_file() {
        println!("cargo:rustc-link-lib=static=pipec_runtime");
        // what the C library itself links: dlopen for the driver, libm, and threads (the NCCL abort)
        for system in ["dl", "m", "pthread"] {
            println!("cargo:rustc-link-lib={system}");
        }
    } else if folder.join(SHARED).is_file() {
        println!("cargo:rustc-link-lib=dylib=pipec_runtime");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", folder.display());
    } else {
        fail(&format!("{} holds neither {STATIC} nor {SHARED}", folder.display()));
    }
    let fake = env::var_os("PIPEC_FAKE_DRIVER").map(PathBuf::from).or_else(|| find(&folder, FAKE_DRIVER));
    if let Some(fake) = fake {
        println!("cargo:rustc-env=PIPEC_FAKE_DRIVER={}", fake.display());
    }
    if let Some(fake) = find(&folder, FAKE_NCCL) {
        println!("cargo:rustc-env=PIPEC_FAKE_NCCL={}", fake.display());
    }
    if let Some(fake) = find(&folder, FAKE_CUBLASLT) {
        println!("cargo:rustc-env=PIPEC_FAKE_CUBLASLT={}", fake.display());
    }
    println!("cargo:root={}", folder.display()); // DEP_PIPEC_ROOT for crates that link it too
}

/// CMake's build of `native/` under OUT_DIR; the folder holding the library.
fn build_with_cmake() -> PathBuf {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source = manifest.join("../..").canonicalize().unwrap_or_else(|_| manifest.join("../.."));
    if !source.join("CMakeLists.txt").is_file() {
        fail(&format!(
            "{} has no CMakeLists.txt to build the C runtime from; set PIPEC_LIB_DIR to a folder \
                       holding libpipec.a or libpipec.so",
            source.display()
        ));
    }
    for watched in ["CMakeLists.txt", "include", "src"] {
        println!("cargo:rerun-if-changed={}", source.join(watched).display());
    }
    let build = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("cmake");
    run(Command::new("cmake").arg("-S").arg(&source).arg("-B").arg(&build).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DPIPEC_TESTS=ON",
        "-DPIPEC_EXAMPLES=OFF",
    ]));
    run(Command::new("cmake").arg("--build").arg(&build).arg("--parallel").args([
        "--target",
        "pipec_runtime_static",
        "--target",
        "fake_cuda",
        "--target",
        "fake_nccl",
        "--target",
        "fake_cublaslt",
    ]));
    find(&build, STATIC)
        .and_then(|library| library.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| fail(&format!("CMake built no {STATIC} under {}", build.display())))
}

/// The file `name` in `folder` or below it.
fn find(folder: &Path, name: &str) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(folder).ok()?.flatten().map(|e| e.path()).collect();
    entries.sort();
    if let Some(found) = entries.iter().find(|p| p.file_name().is_some_and(|n| n == name)) {
        return Some(found.clone());
    }
    entries.iter().filter(|p| p.is_dir()).find_map(|sub| find(sub, name))
}

fn run(command: &mut Command) {
    let shown = format!("{command:?}");
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => fail(&format!("`{shown}` failed ({status})")),
        Err(error) => fail(&format!("cannot run `{shown}`: {error} (is CMake installed?)")),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("pipec build script: {message}");
    std::process::exit(1);
}
