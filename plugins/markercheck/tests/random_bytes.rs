//! Random-input robustness (a stand-in for `cargo fuzz` in CI, which needs nightly): mutated
//! manifests and raw random bytes through the scanner and the rewrite model, never a panic.
//! Deterministic (fixed-seed xorshift), so failures reproduce.

use markercheck::scan::scan_bytes;
use markercheck::simulate::{Replacement, rewrite};

const SEEDS: &[&str] = &[
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: a:1 # {\"$imagepolicy\": \"ns:p\"}\n",
    "images:\n  - name: x\n    newTag: v1 # {\"$imagepolicy\": \"ns:p:tag\"}\n---\nkind: List\nitems:\n- a: b # {\"$imagepolicy\": \"ns:p\"}\n",
    "v: |\n  x # {\"$imagepolicy\": \"ns:p\"}\nw: [a, {b: c}] # {\"$imagepolicy\": \"ns:p\"}\n# {\"$imagepolicy\": \"ns:p\"}\n- z\n",
    "a: &x 'q' # {\"$imagepolicy\": \"ns:p\"}\nb: *x\nc: \"e\\x41\" # {\"$imagepolicy\": \"ns:p\"}\r\n--- # c\r\nd: >-\r\n  f\r\n",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const ALPHABET: &[u8] = b" \n\r\t-:#{}[]\"'|>!&*?,%@`$~.0123456789abcimagepolicy\\\xff\xc3";

fn exercise(bytes: Vec<u8>) {
    let Some(f) = scan_bytes("f.yaml".into(), "f.yaml".into(), true, bytes) else {
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
        let r = rewrite(&f, &reps);
        assert!(r.text.is_empty() || r.text.ends_with('\n'));
    }
}

#[test]
fn mutated_manifests_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..20_000 {
        let mut b = SEEDS[i % SEEDS.len()].as_bytes().to_vec();
        for _ in 0..1 + rng.below(6) {
            let pos = rng.below(b.len() + 1);
            match rng.below(3) {
                0 if pos < b.len() => {
                    b.remove(pos);
                }
                1 => b.insert(pos, ALPHABET[rng.below(ALPHABET.len())]),
                _ if pos < b.len() => b[pos] = ALPHABET[rng.below(ALPHABET.len())],
                _ => {}
            }
        }
        exercise(b);
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for _ in 0..5_000 {
        let n = rng.below(300);
        let mut b: Vec<u8> = (0..n)
            .map(|_| ALPHABET[rng.below(ALPHABET.len())])
            .collect();
        b.extend_from_slice(b"\"$imagepolicy\"");
        exercise(b);
    }
}
