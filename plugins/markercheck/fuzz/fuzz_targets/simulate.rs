//! Fuzz scan + simulate with an arbitrary latestRef (first line) and file (the rest): never a
//! panic, and a rewrite that claims to be exact reads back as YAML with the new values
//! (`markercheck::fuzzing::simulate_target`).
//!
//! `cd plugins/markercheck/fuzz && cargo +nightly fuzz run simulate`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| markercheck::fuzzing::simulate_target(data));
