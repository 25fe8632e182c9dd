//! Runs the rl_step bundle that build.rs built and embedded: `example-build [STEPS]` replays the
//! step STEPS times (default 100) and prints each labelled diagnostic.

use std::process::ExitCode;

include!(concat!(env!("OUT_DIR"), "/bundle_files.rs"));

fn main() -> ExitCode {
    let steps = match std::env::args().nth(1).map(|s| s.parse::<u64>()) {
        None => 100,
        Some(Ok(steps)) => steps,
        Some(Err(_)) => {
            eprintln!("example-build: error: STEPS must be a whole number");
            return ExitCode::from(2);
        }
    };
    match run(steps) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("example-build: error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(steps: u64) -> pipec::Result<()> {
    let mut pipeline = pipec::Pipeline::open_memory(BUNDLE, &pipec::Options::default())?;
    pipeline.step(steps)?;
    pipeline.synchronize()?;
    for (label, value) in pipeline.diagnostics()? {
        println!("{label} = {value}");
    }
    pipeline.close()
}

#[cfg(test)]
mod tests {
    use super::BUNDLE;

    #[test]
    fn the_binary_carries_every_file_the_manifest_lists() {
        let manifest = BUNDLE.iter().find(|f| f.path == "manifest.json").expect("the manifest is embedded");
        let manifest = std::str::from_utf8(manifest.data).unwrap();
        assert!(manifest.contains("\"format\": \"pipec-bundle\""));
        let listed = manifest.matches(": \"sha256:").count();
        assert_eq!(listed + 1, BUNDLE.len(), "every listed file, and the manifest");
        for file in BUNDLE.iter().filter(|f| f.path != "manifest.json") {
            assert!(manifest.contains(&format!("\"{}\": \"sha256:", file.path)), "{} is listed", file.path);
        }
    }
}
