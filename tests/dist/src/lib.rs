//! Distribution tests of cluster-loop (see `tests/`); the library is empty on purpose, the
//! `cltest-plugin` binary is the completion test plugin, linked as `kubectl-cltest` into a temp
//! bin dir by each test (never a `kubectl-*` file in target/, where `kubectl plugin list` would
//! show it to anyone with target/debug on PATH).
