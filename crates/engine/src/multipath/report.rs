//! The multipath block of a result: `sanbench_doc::multipath`, at its old path.

pub use sanbench_doc::multipath::*;
