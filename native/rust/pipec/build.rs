//! Links pipec's C runtime: from `$PIPEC_LIB_DIR` when set (a prebuilt `libpipec.a` or
//! `libpipec.so`), else built here from the repository's `native/` folder with CMake (which this
//! crate's folder sits in: `native/rust/pipec`). Only std: a build script may not depend on a
//! crate either, as nothing can be downloaded.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PIPEC_LIB_DIR");
    let folder = match env::var_os("PIPEC_LIB_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => build_with_cmake(),
    };
    let static_library = folder.join("libpipec.a");
    let shared_library = folder.join("libpipec.so");
    println!("cargo:rustc-link-search=native={}", folder.display());
    if static_library.is_file() {
        println!("cargo:rustc-link-lib=static=pipec");
        // what the C library itself links: dlopen for the driver, threads, libm
        for system in ["dl", "pthread", "m"] {
            println!("cargo:rustc-link-lib={system}");
        }
    } else if shared_library.is_file() {
        println!("cargo:rustc-link-lib=dylib=pipec");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", folder.display());
    } else {
        fail(&format!("{} holds neither libpipec.a nor libpipec.so", folder.display()));
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
    run(Command::new("cmake").arg("-S").arg(&source).arg("-B").arg(&build).arg("-DCMAKE_BUILD_TYPE=Release"));
    run(Command::new("cmake").arg("--build").arg(&build).arg("--target").arg("pipec").arg("--parallel"));
    find_library(&build)
        .unwrap_or_else(|| fail(&format!("CMake built no libpipec.a or libpipec.so under {}", build.display())))
}

fn find_library(folder: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(folder).ok()?;
    let mut subfolders = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "libpipec.a" || name == "libpipec.so" {
            return Some(folder.to_path_buf());
        }
        if path.is_dir() {
            subfolders.push(path);
        }
    }
    subfolders.sort();
    subfolders.iter().find_map(|sub| find_library(sub))
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
