//! The stream's side of fused I/O ([`Queue::submit_fused`](crate::engine::Queue::submit_fused)):
//! for an engine that moves the bytes itself in this process (`mem:`), a write's stamped data is
//! XOR-copied from the pool straight to where the engine keeps it, and a read is checked while
//! it is copied into the arena, so each byte is touched once. What lands on the target is byte
//! for byte what the ordinary path (stamp into the arena slot, then the engine's copy) writes,
//! and a read's faults are classified by the same [`Checker`](crate::verify::Checker).

use super::stream_verify::StreamVerify;
use crate::engine::{DataPath, Io};
use crate::stamp::{prefetch_lines, Stamper};

/// A stream's stamper, the run's pool and (under `--verify`) its verification, lent to the
/// engine for one batch.
pub(super) struct StreamData<'a> {
    pub(super) stamper: &'a mut Stamper,
    pub(super) pool: &'a [u8],
    pub(super) verify: Option<&'a mut StreamVerify>,
}

impl DataPath for StreamData<'_> {
    #[inline]
    fn fill(&mut self, io: &Io, dst: &mut [u8]) {
        match &self.verify {
            None => self.stamper.fill_gen_far(dst, io.offset, self.pool, |_| 0),
            Some(sv) => {
                // Each granule's next generation, locked when the write was drawn.
                let (cells, shift) = (&sv.cells[io.tag as usize], sv.shift);
                let first = io.offset >> shift;
                let gen_of = |o: u64| cells[((o >> shift) - first) as usize] as u32;
                self.stamper.fill_gen_far(dst, io.offset, self.pool, gen_of);
            }
        }
    }

    #[inline]
    fn read(&mut self, io: &Io, src: &[u8], dst: &mut [u8], ahead: &[u8]) {
        match &mut self.verify {
            None => {
                prefetch_lines(ahead);
                dst.copy_from_slice(src)
            }
            Some(sv) => {
                let t = io.tag as usize;
                sv.checker
                    .copy_check(src, dst, io.offset, &sv.cells[t], &mut sv.rep, ahead);
                sv.checked[t] = true;
            }
        }
    }
}

#[cfg(test)]
#[path = "fused_tests.rs"]
mod tests;
