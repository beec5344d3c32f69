//! Byte-for-byte check against Flux's own setter fixtures
//! (fluxcd/image-automation-controller internal/update/testdata/setters), read from
//! ../shared/oracle beside the repository. Skips with a message when the folder is absent.

use markercheck::check::{Config, run};
use markercheck::objects::from_yaml_file;
use std::path::PathBuf;

fn oracle() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/oracle/image-automation-controller-setters");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: oracle folder {} is absent", p.display());
        None
    }
}

#[test]
fn setters_oracle_byte_for_byte() {
    let Some(o) = oracle() else { return };
    let objects = from_yaml_file(&o.join("policies.yaml"), "flux-system").unwrap();
    assert_eq!(objects.policies.len(), 3);
    let cfg = Config {
        paths: vec![o.join("original")],
        default_namespace: "flux-system".into(),
        extra: objects,
        max_file_size: markercheck::scan::DEFAULT_MAX_FILE_SIZE,
        ..Default::default()
    };
    let report = run(&cfg);
    let mut changed: Vec<String> = report
        .changes
        .iter()
        .map(|c| c.abs.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    changed.sort();
    let mut expected: Vec<String> = std::fs::read_dir(o.join("expected"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    assert_eq!(changed, expected, "set of rewritten files");
    for c in &report.changes {
        let name = c.abs.file_name().unwrap();
        let want = std::fs::read_to_string(o.join("expected").join(name)).unwrap();
        assert_eq!(c.new, want, "{}", name.to_string_lossy());
        assert!(c.exact, "{}: {:?}", name.to_string_lossy(), c.caveats);
    }
}
