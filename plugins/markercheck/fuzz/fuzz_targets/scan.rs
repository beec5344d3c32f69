//! Fuzz the scanner and the rewrite model: arbitrary bytes as a selected `.yaml` file must
//! never panic; every effective marker is simulated with a fixed value
//! (`markercheck::fuzzing::scan_target`).
//!
//! `cd plugins/markercheck/fuzz && cargo +nightly fuzz run scan`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| markercheck::fuzzing::scan_target(data));
