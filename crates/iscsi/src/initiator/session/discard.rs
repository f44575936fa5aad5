//! The session's side of trims and write-zeroes (see `initiator::discard` for the policy):
//! UNMAP commands that carry several I/Os, chains of commands for one I/O larger than the
//! LUN's limits, and the completions of the I/Os that followed another's command.

use sanbench_io::{Completion, EngineError, Io, Op};

use super::{Cmd, Dir, Session, Src, NO_TAG};
use crate::initiator::discard::{Discard, TrimBy};
use crate::scsi::cdb::op;
use crate::scsi::unmap;

/// What is left of one I/O's trim or zeroing after the command in flight.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Chain {
    /// Op::Trim or Op::WriteZeroes.
    op: Option<Op>,
    lba: u64,
    blocks: u64,
}

impl Session {
    /// Sets what the LUN offers, sizing each task's UNMAP parameter list.
    pub(crate) fn set_discard(&mut self, d: Discard) {
        let depth = self.depth();
        self.disc = d;
        if d.trim == Some(TrimBy::Unmap) {
            self.slot = 8 + 16 * d.descriptors(depth);
            self.plist = vec![0; self.slot * depth];
        }
        if d.trim.is_some() || d.zeroes {
            self.follow = vec![NO_TAG; depth];
            self.chain = vec![Chain::default(); depth];
        }
    }

    /// The blocks of a trim or zeroing I/O, or the errno to complete it with.
    fn blocks_of(&self, io: &Io) -> Result<(u64, u64), i32> {
        let bs = u64::from(self.block_size);
        let ok = self.disc.supports(io.op)
            && io.len > 0
            && io.offset.is_multiple_of(bs)
            && u64::from(io.len).is_multiple_of(bs)
            && (io.tag as usize) < self.chain.len();
        if !ok {
            return Err(if self.disc.supports(io.op) {
                -libc::EINVAL
            } else {
                -libc::EOPNOTSUPP
            });
        }
        Ok((io.offset / bs, u64::from(io.len) / bs))
    }

    /// One WRITE SAME(16) (zeroing, or unmapping where the LUN takes no UNMAP), chained
    /// beyond the LUN's WRITE SAME limit; `Err(0)`: nothing to send (no whole granule).
    pub(super) fn discard_cmd(&mut self, io: &Io) -> Result<Cmd, i32> {
        let (lba, blocks) = self.blocks_of(io)?;
        let (lba, blocks) = if io.op == Op::Trim {
            self.disc.granules(lba, blocks).ok_or(0)?
        } else {
            (lba, blocks)
        };
        if io.op == Op::Trim && self.disc.trim == Some(TrimBy::Unmap) {
            let n = blocks.min(self.disc.unmap_lbas());
            self.chain[io.tag as usize] = Chain {
                op: Some(io.op),
                lba: lba + n,
                blocks: blocks - n,
            };
            return Ok(self.unmap_cmd(io.tag, &[(lba, n)]));
        }
        let n = blocks.min(self.disc.write_same_blocks());
        self.chain[io.tag as usize] = Chain {
            op: Some(io.op),
            lba: lba + n,
            blocks: blocks - n,
        };
        Ok(self.write_same_cmd(io.tag, io.op == Op::Trim, lba, n))
    }

    fn write_same_cmd(&self, tag: u32, unmap: bool, lba: u64, blocks: u64) -> Cmd {
        let mut cdb = [0u8; 16];
        cdb[0] = op::WRITE_SAME16;
        cdb[1] = (unmap as u8) << 3;
        cdb[2..10].copy_from_slice(&lba.to_be_bytes());
        cdb[10..14].copy_from_slice(&(blocks as u32).to_be_bytes());
        Cmd {
            tag,
            cdb,
            dir: Dir::Out,
            buf: 0,
            len: self.block_size,
            src: Src::Zero,
            allow_short: false,
            retries: 0,
        }
    }

    /// An UNMAP on task `tag` naming `ranges`, its parameter list in the task's slot.
    fn unmap_cmd(&mut self, tag: u32, ranges: &[(u64, u64)]) -> Cmd {
        let at = tag as usize * self.slot;
        let n = unmap::encode(ranges, &mut self.plist[at..at + self.slot]);
        let mut cdb = [0u8; 16];
        cdb[0] = op::UNMAP;
        cdb[7..9].copy_from_slice(&(n as u16).to_be_bytes());
        Cmd {
            tag,
            cdb,
            dir: Dir::Out,
            buf: at,
            len: n as u32,
            src: Src::Param,
            allow_short: false,
            retries: 0,
        }
    }

    /// The trims of one submit as UNMAP commands of up to the LUN's descriptor and block
    /// counts; an I/O larger than one command allows goes alone, as a chain.
    pub(crate) fn submit_trims(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let (max_d, max_l) = (self.disc.descriptors(self.depth()), self.disc.unmap_lbas());
        let mut group: Vec<(u32, u64, u64)> = Vec::with_capacity(max_d);
        let mut sum = 0u64;
        for io in ios {
            let r = self
                .blocks_of(io)
                .and_then(|(l, b)| self.disc.granules(l, b).ok_or(0));
            let (lba, blocks) = match r {
                Ok(r) => r,
                Err(errno) => {
                    self.done.push(Completion {
                        tag: io.tag,
                        result: errno,
                    });
                    continue;
                }
            };
            if blocks > max_l {
                match self.discard_cmd(io) {
                    Ok(cmd) => self.enqueue(cmd)?,
                    Err(result) => self.done.push(Completion {
                        tag: io.tag,
                        result,
                    }),
                }
                continue;
            }
            if group.len() == max_d || sum + blocks > max_l {
                self.send_group(&group)?;
                group.clear();
                sum = 0;
            }
            group.push((io.tag, lba, blocks));
            sum += blocks;
        }
        self.send_group(&group)
    }

    fn send_group(&mut self, group: &[(u32, u64, u64)]) -> Result<(), EngineError> {
        let Some(&(lead, ..)) = group.first() else {
            return Ok(());
        };
        for &(tag, ..) in &group[1..] {
            if self.follow[tag as usize] != NO_TAG || tag == lead {
                return Err(busy(tag));
            }
        }
        let ranges: Vec<(u64, u64)> = group.iter().map(|&(_, l, b)| (l, b)).collect();
        self.chain[lead as usize] = Chain::default();
        let cmd = self.unmap_cmd(lead, &ranges);
        self.enqueue(cmd)?;
        for &(tag, ..) in &group[1..] {
            self.follow[tag as usize] = lead;
            self.followers += 1;
        }
        Ok(())
    }

    /// Completes task `tag` with `result`: the next command of its chain instead while one is
    /// left and this one succeeded; then the I/Os that followed its UNMAP, with the same result.
    pub(super) fn finish(&mut self, tag: u32, result: i32) {
        if let Some(c) = self.chain.get_mut(tag as usize) {
            if c.blocks > 0 && result == 0 {
                let (op, lba, blocks) = (c.op, c.lba, c.blocks);
                let unmap = op == Some(Op::Trim) && self.disc.trim == Some(TrimBy::Unmap);
                let max = if unmap {
                    self.disc.unmap_lbas()
                } else {
                    self.disc.write_same_blocks()
                };
                let n = blocks.min(max);
                *c = Chain {
                    op,
                    lba: lba + n,
                    blocks: blocks - n,
                };
                let cmd = if unmap {
                    self.unmap_cmd(tag, &[(lba, n)])
                } else {
                    self.write_same_cmd(tag, op == Some(Op::Trim), lba, n)
                };
                self.requeue(cmd);
                return;
            }
            *c = Chain::default();
        }
        self.done.push(Completion { tag, result });
        if self.followers > 0 {
            for (i, l) in self.follow.iter_mut().enumerate() {
                if *l == tag {
                    *l = NO_TAG;
                    self.followers -= 1;
                    self.done.push(Completion {
                        tag: i as u32,
                        result,
                    });
                }
            }
        }
    }
}

fn busy(tag: u32) -> EngineError {
    EngineError::Invalid(format!("tag {tag} already in flight"))
}
