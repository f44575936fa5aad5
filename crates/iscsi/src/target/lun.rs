//! One logical unit: its store, persistent reservations, and the SCSI command set (SBC-4 /
//! SPC-5 subset). [`Lun::execute`] is pure with respect to the transport: it takes a decoded
//! CDB and the Data-Out bytes and says what to answer.

use sanbench_io::poison;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::outcome::{Outcome, BLOCK, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS, MAX_XFER_BLOCKS};
use super::pr::{Access, PrError, PrState};
use crate::scsi::cdb::{Cdb, CdbLen};
use crate::scsi::sense::Sense;
use crate::scsi::unmap::{self, UnmapError};
use sanbench_blockstore::{BlockStore, CHUNK};

const MAX_WS_BLOCKS: u64 = 1 << 22;
const CAW_STRIPES: usize = 64;

pub struct Lun {
    pub id: u16,
    pub store: BlockStore,
    pub blocks: u64,
    pr: Mutex<PrState>,
    /// True while any registration or reservation exists, so plain I/O skips the PR mutex.
    pr_active: AtomicBool,
    caw: Vec<Mutex<()>>,
    pub serial: String,
    /// The target's identity (see [`Lun::new`]).
    pub target: u32,
}

fn cut(mut v: Vec<u8>, alloc: usize) -> Outcome {
    v.truncate(alloc);
    Outcome::Data(v)
}

impl Lun {
    /// `target` tells this target's LUNs from another's: it goes into the serial number and
    /// the VPD 0x83 designators, which initiators compare across paths.
    pub fn new(id: u16, store: BlockStore, size: u64, target: u32) -> Lun {
        Lun {
            id,
            store,
            blocks: size / BLOCK,
            pr: Mutex::new(PrState::default()),
            pr_active: AtomicBool::new(false),
            caw: (0..CAW_STRIPES).map(|_| Mutex::new(())).collect(),
            serial: format!("SANB{target:08x}{id:04}"),
            target,
        }
    }

    /// Bytes of Data-Out the command wants (the rest of the EDTL is residual).
    pub fn data_out_len(cdb: &Cdb) -> usize {
        match *cdb {
            Cdb::Write { blocks, .. } => blocks as usize * BLOCK as usize,
            Cdb::WriteSame {
                ndob: false,
                blocks: _,
                ..
            } => BLOCK as usize,
            Cdb::CompareAndWrite { blocks, .. } => 2 * blocks as usize * BLOCK as usize,
            Cdb::Verify {
                bytchk: 1, blocks, ..
            } => blocks as usize * BLOCK as usize,
            Cdb::Verify { bytchk: 3, .. } => BLOCK as usize,
            Cdb::Unmap { param_len, .. } => param_len as usize,
            Cdb::PersistentReserveOut { param_len, .. } => param_len as usize,
            _ => 0,
        }
    }

    fn range(&self, lba: u64, blocks: u64) -> Result<(), Sense> {
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks => Ok(()),
            _ => Err(Sense::LBA_OUT_OF_RANGE),
        }
    }

    /// The checks every media command makes first: no protection information asked (the LUN
    /// is formatted without it: byte 1 of the CDB is an invalid field), then the range.
    fn unprotected_range(&self, protect: u8, lba: u64, blocks: u64) -> Result<(), Sense> {
        if protect != 0 {
            return Err(Sense::INVALID_FIELD_IN_CDB.with_field(true, 1, None));
        }
        self.range(lba, blocks)
    }

    fn access(cdb: &Cdb) -> Access {
        match cdb {
            Cdb::Read { .. }
            | Cdb::Verify { .. }
            | Cdb::ModeSense { .. }
            | Cdb::GetLbaStatus { .. } => Access::Read,
            Cdb::Write { .. }
            | Cdb::WriteSame { .. }
            | Cdb::Unmap { .. }
            | Cdb::CompareAndWrite { .. }
            | Cdb::SynchronizeCache { .. } => Access::Write,
            _ => Access::None,
        }
    }

    /// Executes one command for I_T nexus `nexus`.
    pub fn execute(&self, cdb: &Cdb, data: &[u8], nexus: &str) -> Outcome {
        let acc = Self::access(cdb);
        if acc != Access::None && self.pr_active.load(Ordering::Acquire) {
            let pr = poison::lock(&self.pr);
            if !pr.allowed(nexus, acc) {
                return Outcome::Conflict;
            }
        }
        match self.run(cdb, data, nexus) {
            Ok(o) => o,
            Err(s) => Outcome::Check(s),
        }
    }

    fn run(&self, cdb: &Cdb, data: &[u8], nexus: &str) -> Result<Outcome, Sense> {
        let io = |_e: std::io::Error| Sense::WRITE_ERROR;
        let field = |byte: u16| Sense::INVALID_FIELD_IN_CDB.with_field(true, byte, None);
        Ok(match *cdb {
            Cdb::TestUnitReady | Cdb::StartStopUnit { .. } => Outcome::Good,
            Cdb::Inquiry {
                evpd,
                page,
                alloc_len,
            } => cut(
                super::inquiry::inquiry(self.target, self.id, &self.serial, evpd, page)?,
                alloc_len as usize,
            ),
            Cdb::ModeSense { .. } => super::inquiry::mode_sense(self.blocks, cdb)?,
            Cdb::RequestSense { desc, alloc_len } => {
                let s = Sense::NO_SENSE;
                cut(
                    if desc {
                        s.descriptor()
                    } else {
                        s.fixed().to_vec()
                    },
                    alloc_len as usize,
                )
            }
            Cdb::ReadCapacity10 => {
                let last = (self.blocks - 1).min(0xffff_ffff) as u32;
                let mut v = last.to_be_bytes().to_vec();
                v.extend_from_slice(&(BLOCK as u32).to_be_bytes());
                Outcome::Data(v)
            }
            Cdb::ReadCapacity16 { alloc_len } => {
                let mut v = vec![0u8; 32];
                v[0..8].copy_from_slice(&(self.blocks - 1).to_be_bytes());
                v[8..12].copy_from_slice(&(BLOCK as u32).to_be_bytes());
                v[14] = 0x80 | 0x40; // LBPME, LBPRZ: thin provisioned, unmapped reads zero
                cut(v, alloc_len as usize)
            }
            Cdb::GetLbaStatus { lba, alloc_len } => {
                if lba >= self.blocks {
                    return Err(Sense::LBA_OUT_OF_RANGE);
                }
                let size = self.blocks * BLOCK;
                let mut v = vec![0u8; 8];
                let mut pos = lba * BLOCK;
                while pos < size
                    && v.len() + 16 <= (alloc_len as usize).max(24)
                    && v.len() < 8 + 16 * 64
                {
                    let (mapped, end) = self.store.mapped(pos, size - pos);
                    let end = end.min(size).max(pos + BLOCK);
                    v.extend_from_slice(&(pos / BLOCK).to_be_bytes());
                    v.extend_from_slice(
                        &(((end - pos) / BLOCK).min(u32::MAX as u64) as u32).to_be_bytes(),
                    );
                    v.extend_from_slice(&[if mapped { 0 } else { 1 }, 0, 0, 0]);
                    pos = end;
                }
                let n = (v.len() - 4) as u32;
                v[0..4].copy_from_slice(&n.to_be_bytes());
                cut(v, alloc_len as usize)
            }
            Cdb::Read {
                len,
                lba,
                blocks,
                protect,
                ..
            } => {
                self.unprotected_range(protect, lba, blocks as u64)?;
                if blocks > MAX_XFER_BLOCKS && len != CdbLen::L6 {
                    return Err(field(if len == CdbLen::L10 { 7 } else { 6 }));
                }
                Outcome::Read {
                    off: lba * BLOCK,
                    len: blocks as usize * BLOCK as usize,
                }
            }
            Cdb::Write {
                lba,
                blocks,
                protect,
                fua,
                verify,
                ..
            } => {
                self.unprotected_range(protect, lba, blocks as u64)?;
                let n = (blocks as usize * BLOCK as usize).min(data.len()) & !(BLOCK as usize - 1);
                self.store
                    .write(lba * BLOCK, &data[..n], fua || verify)
                    .map_err(io)?;
                Outcome::Good
            }
            Cdb::Verify {
                lba,
                blocks,
                protect,
                bytchk,
                ..
            } => {
                // Both invalid in byte 1, as protection information is.
                if bytchk == 2 {
                    return Err(field(1));
                }
                self.unprotected_range(protect, lba, blocks as u64)?;
                if bytchk != 0 && blocks > 0 {
                    let mut cur = vec![0u8; blocks as usize * BLOCK as usize];
                    self.store
                        .read(lba * BLOCK, &mut cur)
                        .map_err(|_| Sense::READ_ERROR)?;
                    let want: Box<dyn Fn(usize) -> u8> = if bytchk == 1 {
                        Box::new(|i| data.get(i).copied().unwrap_or(0))
                    } else {
                        Box::new(|i| data.get(i % BLOCK as usize).copied().unwrap_or(0))
                    };
                    if let Some(i) = (0..cur.len()).find(|&i| cur[i] != want(i)) {
                        return Err(Sense::MISCOMPARE_VERIFY.with_info(i as u64));
                    }
                }
                Outcome::Good
            }
            Cdb::SynchronizeCache { lba, blocks, .. } => {
                self.range(lba, blocks as u64)?;
                self.store.flush().map_err(io)?;
                Outcome::Good
            }
            Cdb::WriteSame {
                sixteen,
                lba,
                blocks,
                protect,
                anchor,
                unmap,
                ndob,
            } => {
                // Both invalid in byte 1, as protection information is.
                if anchor {
                    return Err(field(1));
                }
                self.unprotected_range(protect, lba, blocks as u64)?;
                let blocks = if blocks == 0 {
                    self.blocks - lba
                } else {
                    blocks as u64
                };
                if blocks > MAX_WS_BLOCKS {
                    return Err(field(if sixteen { 10 } else { 7 }));
                }
                let pattern: &[u8] = if ndob {
                    &[0u8; BLOCK as usize]
                } else {
                    data.get(..BLOCK as usize)
                        .ok_or(Sense::PARAM_LIST_LENGTH_ERROR)?
                };
                // LBPRZ: unmapped blocks read as zeros, so UNMAP wins over the pattern.
                if unmap {
                    self.store.trim(lba * BLOCK, blocks * BLOCK).map_err(io)?;
                } else if pattern.iter().all(|&b| b == 0) {
                    // Zeros without UNMAP (an initiator's write-zeroes): the blocks stay
                    // mapped, as SBC-4 asks, without writing a block at a time.
                    self.store
                        .zero(lba * BLOCK, blocks * BLOCK, true)
                        .map_err(io)?;
                } else {
                    let per = (CHUNK as u64 / BLOCK).min(blocks) as usize;
                    let buf: Vec<u8> = pattern
                        .iter()
                        .copied()
                        .cycle()
                        .take(per * BLOCK as usize)
                        .collect();
                    let mut done = 0u64;
                    while done < blocks {
                        let n = (blocks - done).min(per as u64) as usize;
                        self.store
                            .write((lba + done) * BLOCK, &buf[..n * BLOCK as usize], false)
                            .map_err(io)?;
                        done += n as u64;
                    }
                }
                Outcome::Good
            }
            Cdb::Unmap { anchor, .. } => {
                if anchor {
                    return Err(field(1));
                }
                let ranges = unmap::decode(data, MAX_UNMAP_DESCRIPTORS).map_err(|e| match e {
                    UnmapError::Length => Sense::PARAM_LIST_LENGTH_ERROR,
                    UnmapError::TooManyDescriptors => Sense::INVALID_FIELD_IN_PARAM,
                })?;
                // MAXIMUM UNMAP LBA COUNT bounds the whole command (SBC-4 §5.30.1).
                let mut total = 0u64;
                for &(lba, n) in &ranges {
                    total += u64::from(n);
                    if total > u64::from(MAX_UNMAP_BLOCKS) {
                        return Err(Sense::INVALID_FIELD_IN_PARAM);
                    }
                    self.range(lba, u64::from(n))?;
                }
                for (lba, n) in ranges {
                    let n = u64::from(n);
                    self.store.trim(lba * BLOCK, n * BLOCK).map_err(io)?;
                }
                Outcome::Good
            }
            Cdb::CompareAndWrite {
                lba,
                blocks,
                protect,
                ..
            } => {
                self.unprotected_range(protect, lba, blocks as u64)?;
                if blocks == 0 {
                    return Ok(Outcome::Good);
                }
                let n = blocks as usize * BLOCK as usize;
                if data.len() < 2 * n {
                    return Err(Sense::PARAM_LIST_LENGTH_ERROR);
                }
                let _guards = self.lock_stripes(lba, blocks as u64);
                let mut cur = vec![0u8; n];
                self.store
                    .read(lba * BLOCK, &mut cur)
                    .map_err(|_| Sense::READ_ERROR)?;
                if let Some(i) = (0..n).find(|&i| cur[i] != data[i]) {
                    return Err(Sense::MISCOMPARE_VERIFY.with_info(i as u64));
                }
                self.store
                    .write(lba * BLOCK, &data[n..2 * n], false)
                    .map_err(io)?;
                Outcome::Good
            }
            Cdb::ReportLuns { .. } => unreachable_report_luns(),
            Cdb::PersistentReserveIn { action, alloc_len } => {
                let pr = poison::lock(&self.pr);
                match pr.read(action) {
                    Ok(v) => cut(v, alloc_len as usize),
                    Err(PrError::Conflict) => Outcome::Conflict,
                    Err(PrError::Check(s)) => return Err(s),
                }
            }
            Cdb::PersistentReserveOut {
                action,
                scope,
                rtype,
                ..
            } => {
                let mut pr = poison::lock(&self.pr);
                let r = pr.out(nexus, action, scope, rtype, data);
                self.pr_active.store(pr.active(), Ordering::Release);
                match r {
                    Ok(()) => Outcome::Good,
                    Err(PrError::Conflict) => Outcome::Conflict,
                    Err(PrError::Check(s)) => return Err(s),
                }
            }
        })
    }

    /// COMPARE AND WRITE atomicity: lock every stripe the range touches, in index order.
    fn lock_stripes(&self, lba: u64, blocks: u64) -> Vec<std::sync::MutexGuard<'_, ()>> {
        let first = lba * BLOCK / CHUNK as u64;
        let last = ((lba + blocks) * BLOCK - 1) / CHUNK as u64;
        let mut idx: Vec<usize> = (first..=last)
            .map(|c| (c % CAW_STRIPES as u64) as usize)
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| poison::lock(&self.caw[i]))
            .collect()
    }
}

/// REPORT LUNS is answered by the session (it knows all LUNs), never by a LUN.
fn unreachable_report_luns() -> Outcome {
    Outcome::Check(Sense::INVALID_OPCODE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::unmap::encode;

    fn lun() -> Lun {
        Lun::new(0, BlockStore::ram(8 << 20, false).unwrap(), 8 << 20, 1)
    }

    fn unmap(l: &Lun, ranges: &[(u64, u64)]) -> Outcome {
        let mut p = vec![0u8; 8 + 16 * ranges.len()];
        let n = encode(ranges, &mut p);
        let cdb = Cdb::Unmap {
            anchor: false,
            param_len: n as u16,
        };
        l.execute(&cdb, &p[..n], "i")
    }

    fn check(o: Outcome) -> Option<Sense> {
        match o {
            Outcome::Check(s) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn unmap_frees_each_descriptor_within_the_block_limits() {
        let l = lun();
        l.store.write(0, &vec![7u8; 8 << 20], false).unwrap();
        let full = l.store.allocated_bytes();
        // Two descriptors of whole chunks: both freed.
        let c = CHUNK as u64 / BLOCK;
        assert!(check(unmap(&l, &[(0, c), (4 * c, c)])).is_none());
        assert_eq!(l.store.allocated_bytes(), full - 2 * CHUNK as u64);
        // More descriptors than the Block Limits page allows, or more blocks in all.
        let many: Vec<(u64, u64)> = (0..MAX_UNMAP_DESCRIPTORS as u64 + 1)
            .map(|i| (i, 1))
            .collect();
        assert_eq!(check(unmap(&l, &many)), Some(Sense::INVALID_FIELD_IN_PARAM));
        let half = u64::from(MAX_UNMAP_BLOCKS) / 2 + 1;
        let big = Lun::new(0, BlockStore::ram(1 << 30, false).unwrap(), 1 << 30, 1);
        assert_eq!(
            check(unmap(&big, &[(0, half), (half, half)])),
            Some(Sense::INVALID_FIELD_IN_PARAM)
        );
        // Past the end: nothing unmapped.
        let before = l.store.allocated_bytes();
        assert_eq!(
            check(unmap(&l, &[(8 * c, c), (l.blocks, 1)])),
            Some(Sense::LBA_OUT_OF_RANGE)
        );
        assert_eq!(l.store.allocated_bytes(), before);
    }
}
