//! Builds the bundle of pipelines/rl_step.pipe with `pipec build` (the `pipec` on the PATH, or
//! $PIPEC) into OUT_DIR, and writes `bundle_files.rs`: the bundle's files as `include_bytes!`
//! entries, so the binary carries its pipeline and opens it from memory. Cargo runs this again
//! when the pipeline, its kernels or $PIPEC change; `pipec build` is deterministic, so an
//! unchanged input gives the same binary.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCH: &str = "sm_90";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../..");
    let pipe = root.join("pipelines/rl_step.pipe");
    let bundle = PathBuf::from(env::var("OUT_DIR").unwrap()).join("rl_step.bundle");
    for input in ["pipelines", "kernels"] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    println!("cargo:rerun-if-env-changed=PIPEC");
    let pipec = env::var("PIPEC").unwrap_or_else(|_| "pipec".to_string());
    let status = Command::new(&pipec).arg("build").arg(&pipe).arg("-o").arg(&bundle).args(["--arch", ARCH]).status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => fail(&format!("`{pipec} build {}` failed ({status}); its diagnostics are above", pipe.display())),
        Err(error) => fail(&format!("cannot run `{pipec}` ({error}): install pipec (pip install pipec) or set PIPEC")),
    }
    let mut table = String::from("/// The bundle's files, by their paths in the bundle.\n");
    table += "pub const BUNDLE: &[pipec::BundleFile<'static>] = &[\n";
    for path in files(&bundle) {
        let relative = path.strip_prefix(&bundle).unwrap().to_str().unwrap().to_string();
        writeln!(table, "    pipec::BundleFile {{ path: {relative:?}, data: include_bytes!({:?}) }},", path.display())
            .unwrap();
    }
    table += "];\n";
    std::fs::write(PathBuf::from(env::var("OUT_DIR").unwrap()).join("bundle_files.rs"), table).unwrap();
}

/// Every file below `folder`, sorted, so the table is the same from one build to the next.
fn files(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(files(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn fail(message: &str) -> ! {
    eprintln!("example-build: {message}");
    std::process::exit(1);
}
