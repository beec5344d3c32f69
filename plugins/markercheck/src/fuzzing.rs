//! Entry points shared by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`, nightly) and the
//! stable regression tests (`tests/fuzz_regressions.rs`), so a crashing input found by the
//! fuzzer replays through exactly the same code in `cargo test`.
//!
//! Both panic (and so report a crash) on a broken invariant; neither returns an error.

use crate::objects::LatestRef;
use crate::scan::{FileScan, scan_bytes};
use crate::simulate::{Replacement, rewrite};

/// Fuzz target `scan`: arbitrary bytes as a `.yaml` file Flux selects. The scanner must not
/// panic; every marker Flux reads is then simulated with the fixed value `ghcr.io/o/a:1.10`
/// (a YAML 1.1 float as a tag, so the quoting path runs) and the rewrite must end in a newline.
pub fn scan_target(data: &[u8]) {
    let Some(f) = scan_bytes("f.yaml".into(), "f.yaml".into(), true, data.to_vec()) else {
        return;
    };
    let reps = replacements(&f, |_| "ghcr.io/o/a:1.10".to_string());
    if f.problem.is_none() && !reps.is_empty() {
        let r = rewrite(&f, &reps);
        assert!(
            r.text.is_empty() || r.text.ends_with('\n'),
            "rewrite without a final newline"
        );
    }
}

/// Fuzz target `simulate`: the first line of `data` is an ImagePolicy `status.latestRef` as
/// given to `--set` (`name:tag[@digest]`, not validated, so any bytes reach the quoting
/// code); the rest is a `.yaml` file. Every marker Flux reads gets its setter's value (`ns:p`
/// the full ref, `:tag`, `:name`, `:digest` the parts), as `check::run` does.
///
/// Invariants: no panic; when the rewrite claims `exact`, its text is YAML that the scanner
/// reads without a problem, with the same markers in the same order, each marked value now
/// reading back as the value set.
pub fn simulate_target(data: &[u8]) {
    let Some(nl) = data.iter().position(|&b| b == b'\n') else {
        return;
    };
    let Ok(r) = std::str::from_utf8(&data[..nl]) else {
        return;
    };
    let Some(latest) = LatestRef::parse(r) else {
        return;
    };
    let yaml = &data[nl + 1..];
    let Some(f) = scan_bytes("f.yaml".into(), "f.yaml".into(), true, yaml.to_vec()) else {
        return;
    };
    if f.problem.is_some() {
        return;
    }
    let value_for = |setter: &str| -> String {
        match setter.rsplit(':').next() {
            Some("tag") if setter.matches(':').count() == 2 => latest.tag.clone(),
            Some("name") if setter.matches(':').count() == 2 => latest.name.clone(),
            Some("digest") if setter.matches(':').count() == 2 => latest.digest.clone(),
            _ => latest.full(),
        }
    };
    let reps = replacements(&f, value_for);
    if reps.is_empty() {
        return;
    }
    let rw = rewrite(&f, &reps);
    if !rw.exact {
        return;
    }
    let again = scan_bytes("f.yaml".into(), "f.yaml".into(), true, rw.text.into_bytes());
    let Some(again) = again else {
        panic!("exact rewrite lost every marker");
    };
    assert_eq!(
        again.problem, None,
        "exact rewrite is not YAML Flux reads:\n{}",
        again.text
    );
    let before: Vec<_> = marked(&f);
    let after: Vec<_> = marked(&again);
    assert_eq!(
        before.len(),
        after.len(),
        "exact rewrite changed the markers:\n{}",
        again.text
    );
    for ((setter, _), (setter2, value2)) in before.iter().zip(&after) {
        assert_eq!(setter, setter2, "marker order changed:\n{}", again.text);
        assert_eq!(
            value2,
            &value_for(setter),
            "value does not read back:\n{}",
            again.text
        );
    }
}

/// (setter, value) of every marker Flux reads and the simulation rewrites.
fn marked(f: &FileScan) -> Vec<(String, String)> {
    f.sites
        .iter()
        .filter(|s| s.effective() && !s.in_list_item)
        .filter_map(|s| Some((s.setter.clone()?, s.target.as_ref()?.value.clone())))
        .collect()
}

fn replacements(f: &FileScan, value_for: impl Fn(&str) -> String) -> Vec<Replacement> {
    f.sites
        .iter()
        .filter(|s| s.effective() && !s.in_list_item)
        .filter_map(|s| {
            let t = s.target.as_ref()?;
            Some(Replacement {
                start: t.start,
                end: t.end,
                value: value_for(s.setter.as_deref()?),
                style: t.style,
            })
        })
        .collect()
}
