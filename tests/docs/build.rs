//! Tells the drift test where `cargo test --workspace` put every package's binaries: the
//! profile directory (`target/debug`), three levels above this build script's OUT_DIR
//! (`target/debug/build/docs-tests-<hash>/out`). Cargo sets `CARGO_BIN_EXE_<name>` only for
//! the binaries of a test's own package; the plugins' binaries are in other packages.
fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile = out
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is target/<profile>/build/<pkg>-<hash>/out");
    println!("cargo:rustc-env=DOCS_BIN_DIR={}", profile.display());
    println!("cargo:rerun-if-changed=build.rs");
}
