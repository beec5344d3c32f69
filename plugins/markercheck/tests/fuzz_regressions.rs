//! Every crashing input cargo-fuzz found (plugins/markercheck/fuzz), replayed on stable through
//! the same entry points as the fuzz targets (`markercheck::fuzzing`). One file per crash in
//! `tests/fuzz-regressions/<target>/`, named after the bug it found.

use std::path::Path;

fn replay(target: &str, f: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target}: {} panics", p.display());
        n += 1;
    }
    n
}

#[test]
fn scan_target_crashes_stay_fixed() {
    assert!(replay("scan", markercheck::fuzzing::scan_target) > 0);
}

#[test]
fn simulate_target_crashes_stay_fixed() {
    assert!(replay("simulate", markercheck::fuzzing::simulate_target) > 0);
}

/// The fuzz corpus kept in the repository (`fuzz/corpus/<target>/`, minimised with
/// `cargo fuzz cmin`), replayed on stable through the same entry points: a CI-sized stand-in
/// for running the fuzzer itself, whose sanitizer build does not fit the CI budget.
fn replay_corpus(target: &str, f: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target}: corpus input {} panics", p.display());
        n += 1;
    }
    n
}

#[test]
fn fuzz_corpus_replays_clean() {
    let scan = replay_corpus("scan", markercheck::fuzzing::scan_target);
    let sim = replay_corpus("simulate", markercheck::fuzzing::simulate_target);
    assert!(
        scan > 0 && sim > 0,
        "corpus missing: scan {scan}, simulate {sim}"
    );
}
