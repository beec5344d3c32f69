//! twin binary.
fn main() {}
