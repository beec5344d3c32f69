//! Engine of `kubectl cutover`: move a Flux Git source to a new URL without rolling the
//! cluster backwards (failure catalogue entry 4).
#![warn(missing_docs)]

pub mod authored;
pub mod git;
