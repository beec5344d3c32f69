//! cluster-loop shared library: what every kubectl plugin of the suite needs.
#![warn(missing_docs)]
