//! Reading a whole span back and checking every unit (`sanbench verify TARGET`): sequential
//! reads at a small depth, each checked as a run's inline check does, with the generation map
//! when one is kept and otherwise with "a valid sanbench unit everywhere" as the expectation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::check::Checker;
use super::map::GenMap;
use super::report::VerifyReport;
use crate::arena::Arena;
use crate::engine::{Completion, Io, Op, Target};
use crate::error::EngineError;
use crate::run::Layout;
use crate::sweep::{check_completion, next_piece, open_queue, piece_size, submit_and_reap};

/// Reads `[0, span)` of `target` in `bs`-byte reads, `depth` at a time, checking each with
/// `checker` against `map` (all cells unknown without one). `progress(done, total)` about
/// every 64 reads.
#[allow(clippy::too_many_arguments)]
pub fn verify_span(
    target: &dyn Target,
    span: u64,
    bs: u64,
    depth: u32,
    checker: &mut Checker,
    map: Option<&GenMap>,
    rep: &mut VerifyReport,
    io_timeout: Duration,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), EngineError> {
    let (block, bs) = piece_size(target.info(), bs, span);
    let depth = depth.max(1);
    let lay = Layout::new(bs, 0, depth);
    let arena = Arc::new(Arena::new(lay.total));
    let mut q = open_queue(target, depth, bs, &arena, io_timeout)?;
    let mut free: Vec<u32> = (0..depth).rev().collect();
    let mut ios: Vec<(u64, u32)> = vec![(0, 0); depth as usize];
    let mut batch = Vec::with_capacity(depth as usize);
    let mut done: Vec<Completion> = Vec::with_capacity(depth as usize);
    let mut cells: Vec<u8> = Vec::new();
    let mut durable: Vec<u8> = Vec::new();
    let (mut off, mut inflight, mut reads) = (0u64, 0usize, 0u64);
    while off < span || inflight > 0 {
        batch.clear();
        while off < span && !stop.load(Ordering::Relaxed) {
            let Some((tag, len)) = next_piece(&mut free, &mut off, span, bs, block) else {
                break;
            };
            ios[tag as usize] = (off, len as u32);
            batch.push(Io {
                fua: false,
                tag,
                op: Op::Read,
                offset: off,
                len: len as u32,
                buf: tag as usize * lay.slot,
            });
            off += len;
        }
        if !submit_and_reap(&mut *q, &batch, &mut inflight, &mut done)? {
            break;
        }
        for c in &done {
            let (o, len) = ios[c.tag as usize];
            check_completion("verify read", o, c)?;
            cells.clear();
            durable.clear();
            if let Some(m) = map {
                let g = m.granule();
                cells.extend(m.range(o, len as u64).map(|i| m.get(i as u64 * g)));
                if m.tracks_durable() {
                    durable.extend(m.range(o, len as u64).map(|i| m.durable_at(i as u64 * g)));
                }
            }
            // SAFETY: the read of this tag completed and the tag is not reused until it is
            // pushed back below.
            let buf = unsafe { arena.slice(c.tag as usize * lay.slot, len as usize) };
            checker.check_durable(buf, o, &cells, &durable, rep);
            free.push(c.tag);
            reads += 1;
            if reads % 64 == 0 {
                progress(o + len as u64, span);
            }
        }
    }
    q.close()?;
    if stop.load(Ordering::Relaxed) && off < span {
        return Err(EngineError::Invalid(format!(
            "verification stopped at {off} of {span} bytes"
        )));
    }
    progress(span, span);
    Ok(())
}
