//! The twin cluster.
