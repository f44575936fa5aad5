//! The loop both whole-span passes share: preconditioning's fill (precondition.rs) and
//! verify's read-back (verify/pass.rs) walk `[0, span)` in order, a few pieces in flight.
//! Set-up and end-of-run code only: a run's streams never come here.

use std::sync::Arc;
use std::time::Duration;

use crate::arena::Arena;
use crate::engine::{Completion, Io, Queue, QueueConfig, Target, TargetInfo};
use crate::error::EngineError;

/// The target's block size (at least 1) and the piece size of a pass asked for `bs`: within
/// the target's largest transfer and the span, in whole blocks, at least one block.
pub(crate) fn piece_size(info: &TargetInfo, bs: u64, span: u64) -> (u64, u64) {
    let block = info.block_size.max(1) as u64;
    let bs = bs.min(info.max_transfer.map_or(u64::MAX, |m| m as u64));
    (block, (bs.min(span) / block * block).max(block))
}

/// The pass's one queue on `target`: `depth` pieces of up to `bs` bytes in `arena`, on a
/// ring of its own.
pub(crate) fn open_queue(
    target: &dyn Target,
    depth: u32,
    bs: u64,
    arena: &Arc<Arena>,
    io_timeout: Duration,
) -> Result<Box<dyn Queue>, EngineError> {
    target.open_queue(&QueueConfig {
        worker: 0,
        depth,
        max_len: bs as u32,
        arena: arena.clone(),
        io_timeout,
        socket_ring: None,
    })
}

/// A free tag and the length of the piece at `*off`; `None` when no tag is free, or when
/// what is left of the span is less than a block (then `*off` becomes `span`: the pass has
/// nothing more to issue).
pub(crate) fn next_piece(
    free: &mut Vec<u32>,
    off: &mut u64,
    span: u64,
    bs: u64,
    block: u64,
) -> Option<(u32, u64)> {
    let tag = free.pop()?;
    let len = bs.min((span - *off) / block * block);
    if len == 0 {
        free.push(tag);
        *off = span;
        return None;
    }
    Some((tag, len))
}

/// Submits `batch` (if it holds anything) and waits for at least one completion into `done`.
/// `Ok(false)` when nothing is in flight: the pass is over.
pub(crate) fn submit_and_reap(
    q: &mut dyn Queue,
    batch: &[Io],
    inflight: &mut usize,
    done: &mut Vec<Completion>,
) -> Result<bool, EngineError> {
    if !batch.is_empty() {
        *inflight += batch.len();
        q.submit(batch)?;
    }
    if *inflight == 0 {
        return Ok(false);
    }
    done.clear();
    q.reap(1, done)?;
    *inflight -= done.len();
    Ok(true)
}

/// A failed completion of the pass's `op` at `offset` as its error.
pub(crate) fn check_completion(
    op: &'static str,
    offset: u64,
    c: &Completion,
) -> Result<(), EngineError> {
    if c.result < 0 {
        return Err(EngineError::Io {
            op,
            offset,
            source: std::io::Error::from_raw_os_error(-c.result),
        });
    }
    Ok(())
}
