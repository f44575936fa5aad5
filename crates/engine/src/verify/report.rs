//! What a verification found (`sanbench_doc::verify`, re-exported here), and a stamp as the
//! report shows it.

pub use sanbench_doc::verify::*;

use crate::stamp::Stamp;

/// A stamp as the report shows it.
pub fn stamp_view(s: &Stamp) -> StampView {
    StampView {
        offset: s.offset,
        run_id: format!("{:016x}", s.run_id),
        generation: s.generation,
        worker: Some(s.worker),
        seq: Some(s.seq),
    }
}
