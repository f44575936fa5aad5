//! A stream's share of the verification: the checker, what it found, the map cells each tag's
//! I/O locked, and which completed writes a flush makes durable (the state file's checkpoint).

use std::sync::Arc;

use crate::verify::{Checker, Verifier, VerifyReport};

/// A stream's share of the verification: its checker, what it found, and the map cells each
/// tag's I/O locked (for a write, the generations it writes).
pub(in crate::run) struct StreamVerify {
    pub(in crate::run) v: Arc<Verifier>,
    pub(in crate::run) checker: Checker,
    pub(in crate::run) rep: VerifyReport,
    pub(in crate::run) cells: Vec<Vec<u8>>,
    pub(in crate::run) shift: u32,
    /// With a state file and flushes: writes completed since the last flush was sent (range
    /// and where its generations start in `pending_gens`), and per flush tag what it covers.
    pub(in crate::run) track_durable: bool,
    pub(in crate::run) pending: Vec<Written>,
    pub(in crate::run) pending_gens: Vec<u8>,
    pub(in crate::run) covers: Vec<(Vec<Written>, Vec<u8>)>,
    /// Tags whose read the engine's fused copy already checked (settled without a check).
    pub(in crate::run) checked: Vec<bool>,
    /// The target promises zeros where it trimmed (its `trim_reads_zeros` parameter: iSCSI
    /// LBPRZ with whole granules, NVMe DLFEAT).
    pub(in crate::run) trim_zeros: bool,
}

/// A completed write awaiting a flush: offset, length, and where its generations start.
type Written = (u64, u64, usize);

impl StreamVerify {
    /// A flush is being sent on tag `t`: it covers every write completed so far.
    pub(super) fn flush_sent(&mut self, t: usize) {
        if self.track_durable {
            let c = &mut self.covers[t];
            c.0.clear();
            c.1.clear();
            std::mem::swap(&mut c.0, &mut self.pending);
            std::mem::swap(&mut c.1, &mut self.pending_gens);
        }
    }

    /// The flush on tag `t` completed: what it covered is durable (the checkpoint).
    pub(super) fn flush_done(&mut self, t: usize, ok: bool) {
        if !self.track_durable || !ok {
            return;
        }
        let (ranges, gens) = &self.covers[t];
        for &(off, len, at) in ranges {
            self.v.map.set_durable(off, len, &gens[at..]);
        }
        self.v.map.sync_durable();
    }
}

impl StreamVerify {
    pub(in crate::run) fn new(v: &Arc<Verifier>, depth: u32, flush_every: u32) -> StreamVerify {
        StreamVerify {
            v: v.clone(),
            checker: v.checker(true),
            rep: VerifyReport::default(),
            cells: vec![Vec::new(); depth as usize],
            shift: v.granule().trailing_zeros(),
            track_durable: v.map.tracks_durable() && flush_every > 0,
            pending: Vec::new(),
            pending_gens: Vec::new(),
            covers: vec![(Vec::new(), Vec::new()); depth as usize],
            checked: vec![false; depth as usize],
            trim_zeros: false,
        }
    }
}
