//! Parsing replies out of the receive buffer: simple replies, structured chunks, READ data
//! placed in the I/O's arena region (proto.md "Simple reply message", "Structured reply
//! chunk message").

use sanbench_io::{EngineError, Op};

use super::{NbdQueue, Recv, Slot};
use crate::wire::transmission::{chunk, Chunk, ReplyHeader, CHUNK_HEADER_LEN};
use crate::wire::{errno, Parsed, MAX_CHUNK_META};

impl NbdQueue {
    /// Parses every complete reply in the receive buffer.
    pub(super) fn process(&mut self) -> Result<(), EngineError> {
        loop {
            if let Recv::Data {
                tag,
                at,
                remaining,
                done,
            } = self.state
            {
                let n = remaining.min(self.rlen - self.rpos);
                if n > 0 {
                    // SAFETY: as in `recv_some`: the READ's own region, checked at its header.
                    let dst = unsafe { self.arena.slice_mut(at, n) };
                    dst.copy_from_slice(&self.rbuf[self.rpos..self.rpos + n]);
                    self.rpos += n;
                }
                if n < remaining {
                    self.state = Recv::Data {
                        tag,
                        at: at + n,
                        remaining: remaining - n,
                        done,
                    };
                    return Ok(());
                }
                self.state = Recv::Header;
                if done {
                    let e = self.slots[tag as usize].error;
                    self.complete(tag, e);
                }
            }
            let avail = &self.rbuf[self.rpos..self.rlen];
            let h = match ReplyHeader::decode(avail) {
                Ok(Parsed::Done { value, len }) => (value, len),
                Ok(Parsed::Incomplete { .. }) => return Ok(()),
                Err(e) => return Err(self.protocol(e.to_string())),
            };
            if !self.header(h)? {
                return Ok(());
            }
        }
    }

    fn slot_of(&self, cookie: u64) -> Result<(u32, Slot), EngineError> {
        match self.slots.get(cookie as usize) {
            Some(s) if s.active => Ok((cookie as u32, *s)),
            _ => Err(self.protocol(format!("reply for unknown cookie {cookie}"))),
        }
    }

    /// Handles one reply header; false when more bytes are needed first.
    fn header(&mut self, (h, hlen): (ReplyHeader, usize)) -> Result<bool, EngineError> {
        let (tag, slot) = self.slot_of(h.cookie())?;
        match h {
            ReplyHeader::Simple { error, .. } => {
                self.rpos += hlen;
                if error == 0 && slot.op == Op::Read && slot.len > 0 {
                    self.state = Recv::Data {
                        tag,
                        at: slot.buf,
                        remaining: slot.len as usize,
                        done: true,
                    };
                } else {
                    self.complete(tag, errno::to_result(error));
                }
            }
            ReplyHeader::Structured {
                flags, kind, len, ..
            } => {
                let done = flags & chunk::FLAG_DONE != 0;
                if kind == chunk::OFFSET_DATA {
                    if self.rlen - self.rpos < CHUNK_HEADER_LEN + 8 {
                        return Ok(false);
                    }
                    let at = self.rpos + CHUNK_HEADER_LEN;
                    let Ok(Chunk::OffsetData { offset, .. }) =
                        Chunk::decode(kind, &self.rbuf[at..at + 8])
                    else {
                        return Err(self.protocol("short OFFSET_DATA chunk"));
                    };
                    let n = (len as u64).saturating_sub(8);
                    let within = offset.wrapping_sub(slot.offset);
                    if slot.op != Op::Read
                        || len < 8
                        || offset < slot.offset
                        || within + n > slot.len as u64
                    {
                        return Err(self.protocol(format!(
                            "OFFSET_DATA {offset}+{n} outside READ {}+{}",
                            slot.offset, slot.len
                        )));
                    }
                    self.rpos += CHUNK_HEADER_LEN + 8;
                    self.state = Recv::Data {
                        tag,
                        at: slot.buf + within as usize,
                        remaining: n as usize,
                        done,
                    };
                    return Ok(true);
                }
                if len > MAX_CHUNK_META {
                    return Err(self.protocol(format!("chunk type {kind} of {len} bytes")));
                }
                let total = CHUNK_HEADER_LEN + len as usize;
                if self.rlen - self.rpos < total {
                    return Ok(false);
                }
                let payload = &self.rbuf[self.rpos + CHUNK_HEADER_LEN..self.rpos + total];
                let c = Chunk::decode(kind, payload).map_err(|e| self.protocol(e.to_string()))?;
                match c {
                    Chunk::None => {}
                    Chunk::OffsetHole { offset, size } => {
                        let within = offset.wrapping_sub(slot.offset);
                        if slot.op != Op::Read
                            || offset < slot.offset
                            || within + u64::from(size) > u64::from(slot.len)
                        {
                            return Err(self.protocol("OFFSET_HOLE outside its READ"));
                        }
                        // SAFETY: the READ's own region, bounds checked just above.
                        let dst = unsafe {
                            self.arena
                                .slice_mut(slot.buf + within as usize, size as usize)
                        };
                        dst.fill(0);
                    }
                    Chunk::Error { error, .. } | Chunk::ErrorOffset { error, .. } => {
                        self.slots[tag as usize].error = errno::to_result(error).min(-1);
                    }
                    Chunk::Other { kind, .. } if kind & chunk::ERROR_BIT != 0 => {
                        self.slots[tag as usize].error = -libc::EINVAL;
                    }
                    Chunk::OffsetData { .. } | Chunk::Other { .. } => {
                        return Err(self.protocol(format!("unexpected chunk type {kind}")))
                    }
                }
                self.rpos += total;
                if done {
                    let e = self.slots[tag as usize].error;
                    self.complete(tag, e);
                }
            }
        }
        Ok(true)
    }
}
