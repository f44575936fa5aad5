//! [`Target::allocation`](sanbench_io::Target::allocation) for iSCSI LUNs: GET LBA STATUS
//! (SERVICE ACTION IN(16), service action 12h; SBC-4 5.7) on a session of its own, logged in
//! for the query and out after it, so the data-path sessions are untouched.
//!
//! Only a LUN whose READ CAPACITY(16) sets LBPME (logical block provisioning management) keeps
//! track of what was written; others answer `None` without a session. A target that rejects
//! the command (CHECK CONDITION on the first request) answers `None` too.
//!
//! The range is walked by the descriptors the target returns: each answer starts at the LBA
//! asked for and covers as much as the target chose to describe; the next request starts where
//! it ended. Deallocated (1) and anchored (2) blocks count as unwritten.

use std::sync::Arc;

use sanbench_io::{Allocation, Arena, EngineError, TargetInfo};

use super::probe::{ask, failed};
use super::{connect, Spec};
use crate::scsi::cdb::Cdb;
use crate::scsi::lba_status::{decode, LbaStatusDescriptor};

/// Room for the header and 255 descriptors: one answer covers many extents.
const ALLOC_LEN: u32 = 8 + 16 * 255;

/// What `Allocation::method` says for iSCSI.
pub const METHOD: &str = "GET LBA STATUS";

/// Blocks covered from `lba` (never past `end`) and how many of them are unwritten, from one
/// answer's descriptors; `None` when the answer does not start at `lba` (a target that skips
/// ahead would make the walk skip blocks unseen).
pub(crate) fn tally(ds: &[LbaStatusDescriptor], lba: u64, end: u64) -> Option<(u64, u64)> {
    let (mut pos, mut holes) = (lba, 0u64);
    for d in ds {
        let d_end = d.lba.saturating_add(u64::from(d.blocks));
        if d_end <= pos {
            continue;
        }
        if d.lba > pos {
            break;
        }
        let n = d_end.min(end) - pos;
        if d.unwritten() {
            holes += n;
        }
        pos += n;
        if pos == end {
            break;
        }
    }
    (pos > lba).then_some((pos - lba, holes))
}

pub(super) fn allocation(
    spec: &Spec,
    info: &TargetInfo,
    offset: u64,
    len: u64,
) -> Result<Option<Allocation>, EngineError> {
    if info.params.get("lbpme").and_then(|v| v.as_bool()) != Some(true) {
        return Ok(None);
    }
    let bs = u64::from(info.block_size.max(1));
    let blocks = info.size / bs;
    let start = (offset / bs).min(blocks);
    let end = offset.saturating_add(len).div_ceil(bs).min(blocks);
    let arena = Arc::new(Arena::new(ALLOC_LEN as usize));
    let mut s = connect(
        spec,
        arena,
        1,
        info.block_size,
        spec.opts.login_timeout,
        None,
    )?;
    let (mut lba, mut holes) = (start, 0u64);
    while lba < end {
        let (r, data) = ask(
            &mut s,
            Cdb::GetLbaStatus {
                lba,
                alloc_len: ALLOC_LEN,
            },
            ALLOC_LEN,
        )?;
        if r != 0 {
            if lba == start {
                // Not supported after all (or not for this LUN): the target cannot tell.
                s.logout()?;
                return Ok(None);
            }
            return Err(failed(&s, &format!("GET LBA STATUS at LBA {lba}")));
        }
        let ds = decode(&data).map_err(|e| s.link.proto(e.to_string()))?;
        let (covered, h) = tally(&ds, lba, end).ok_or_else(|| {
            s.link.proto(format!(
                "GET LBA STATUS at LBA {lba}: no descriptor starts there ({ds:?})"
            ))
        })?;
        lba += covered;
        holes += h;
    }
    s.logout()?;
    Ok(Some(Allocation {
        method: METHOD.into(),
        checked_bytes: (end - start) * bs,
        unwritten_bytes: holes * bs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::lba_status::status::{ANCHORED, DEALLOCATED, MAPPED};

    fn d(lba: u64, blocks: u32, provisioning: u8) -> LbaStatusDescriptor {
        LbaStatusDescriptor {
            lba,
            blocks,
            provisioning,
        }
    }

    #[test]
    fn tally_walks_descriptors_from_the_lba_asked_for() {
        let ds = [d(0, 8, MAPPED), d(8, 16, DEALLOCATED), d(24, 8, ANCHORED)];
        assert_eq!(tally(&ds, 0, 32), Some((32, 24)));
        // From the middle of the first descriptor, up to an end inside the second.
        assert_eq!(tally(&ds, 4, 12), Some((8, 4)));
        // The last descriptor may run past the end: counted only up to it.
        assert_eq!(
            tally(&[d(0, 1 << 30, DEALLOCATED)], 0, 100),
            Some((100, 100))
        );
        // An answer that starts after the LBA asked for, or says nothing: no progress.
        assert_eq!(tally(&[d(5, 8, MAPPED)], 0, 32), None);
        assert_eq!(tally(&[], 0, 32), None);
        // A gap between descriptors stops the walk there (the next request asks again).
        assert_eq!(
            tally(&[d(0, 4, MAPPED), d(8, 4, MAPPED)], 0, 32),
            Some((4, 0))
        );
    }
}
