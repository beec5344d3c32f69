//! Fuzz the scanner and the rewrite model: arbitrary bytes as a selected `.yaml` file must
//! never panic; every effective marker is simulated with a fixed value.
//!
//! `cd plugins/markercheck/fuzz && cargo +nightly fuzz run scan`
#![no_main]

use libfuzzer_sys::fuzz_target;
use markercheck::scan::scan_bytes;
use markercheck::simulate::{Replacement, rewrite};

fuzz_target!(|data: &[u8]| {
    let Some(f) = scan_bytes("f.yaml".into(), "f.yaml".into(), true, data.to_vec()) else {
        return;
    };
    let reps: Vec<Replacement> = f
        .sites
        .iter()
        .filter(|s| s.effective())
        .filter_map(|s| s.target.as_ref())
        .map(|t| Replacement {
            start: t.start,
            end: t.end,
            value: "ghcr.io/o/a:1.10".into(),
            style: t.style,
        })
        .collect();
    if f.problem.is_none() && !reps.is_empty() {
        let _ = rewrite(&f, &reps);
    }
});
