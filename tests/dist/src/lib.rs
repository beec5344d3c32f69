//! Distribution tests of cluster-loop (see `tests/`); the library is empty on purpose, the
//! `kubectl-cltest` binary is the completion test plugin.
