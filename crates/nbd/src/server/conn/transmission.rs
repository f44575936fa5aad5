//! The transmission phase: requests, checks, replies (proto.md "Transmission phase",
//! "Request types"), block status included.

use std::io;

use super::handshake::BASE_ALLOCATION_ID;
use super::{Conn, PendingWrite, FLUSH_AT, R};
use crate::wire::meta::{state, BlockStatus, Extent, MAX_EXTENTS};
use crate::wire::transmission::{chunk, cmd, cmd_flags, Chunk, ReplyHeader, Request};
use crate::wire::{errno, Parsed};
use sanbench_blockstore::counters::Op;

/// The counted op of a request (block status and disconnect are not I/O).
fn op_of(c: u16) -> Option<Op> {
    match c {
        cmd::READ => Some(Op::Read),
        cmd::WRITE => Some(Op::Write),
        cmd::FLUSH => Some(Op::Flush),
        cmd::TRIM => Some(Op::Trim),
        cmd::WRITE_ZEROES => Some(Op::Zero),
        _ => None,
    }
}

impl Conn<'_> {
    pub(super) fn transmission(&mut self) -> R<()> {
        // Requests sent right behind the handshake are in the buffer already: received now.
        self.arrived = std::time::Instant::now();
        loop {
            let (mut found, mut bytes, mut written) = (0u32, 0u64, 0u64);
            loop {
                if self.pending.is_some() {
                    let start = self.out.len();
                    let done = self.take_payload()?;
                    self.hold_since(start);
                    if !done {
                        break;
                    }
                    continue;
                }
                let req = match Request::decode(self.avail()) {
                    Ok(Parsed::Done { value, len }) => {
                        self.rpos += len;
                        value
                    }
                    Ok(Parsed::Incomplete { .. }) => break,
                    Err(e) => return self.wire(e),
                };
                found += 1;
                if matches!(req.cmd, cmd::READ | cmd::WRITE) {
                    bytes += u64::from(req.len);
                }
                if req.cmd == cmd::WRITE {
                    written += u64::from(req.len);
                }
                let start = self.out.len();
                if !self.request(req)? {
                    return Ok(());
                }
                self.hold_since(start);
                if self.out.len() >= FLUSH_AT {
                    self.flush_out()?;
                }
            }
            self.flush_out()?;
            self.wait_for_requests(found, bytes, written)?;
        }
    }

    /// Consumes as much of a pending WRITE's payload as has arrived; true when it completed.
    fn take_payload(&mut self) -> R<bool> {
        let Some(p) = self.pending.as_mut() else {
            return Ok(true);
        };
        let n = (self.rlen - self.rpos).min(p.remaining as usize);
        if n == 0 {
            return Ok(false);
        }
        if p.error == 0 {
            let data = &self.rbuf[self.rpos..self.rpos + n];
            if let Err(e) = self.sh.store.write(p.offset, data, p.fua) {
                p.error = errno::from_io(&e);
            }
        }
        self.rpos += n;
        p.offset += n as u64;
        p.remaining -= n as u32;
        if p.remaining > 0 {
            return Ok(false);
        }
        let (cookie, error, len) = (p.cookie, p.error, p.len);
        self.pending = None;
        self.count(Op::Write, len.into(), error);
        self.simple(cookie, error);
        Ok(true)
    }

    /// Counts one I/O on the export (`serve --metrics-listen`).
    #[inline]
    fn count(&self, op: Op, bytes: u64, error: u32) {
        if let Some(m) = &self.metrics {
            m.io(0, op, bytes, error == 0);
        }
    }

    fn simple(&mut self, cookie: u64, error: u32) {
        ReplyHeader::Simple { error, cookie }.encode(&mut self.out);
    }

    /// The NBD error for a request, or 0 when it may run.
    fn check(&self, r: &Request) -> u32 {
        let cfg = &self.sh.cfg;
        let mut allowed = cmd_flags::FUA;
        match r.cmd {
            cmd::READ if self.structured => allowed |= cmd_flags::DF,
            cmd::WRITE_ZEROES => allowed |= cmd_flags::NO_HOLE | cmd_flags::FAST_ZERO,
            // Only with `base:allocation` selected (proto.md: NBD_EINVAL otherwise).
            cmd::BLOCK_STATUS if self.meta && r.len > 0 => allowed |= cmd_flags::REQ_ONE,
            cmd::READ | cmd::WRITE | cmd::TRIM | cmd::FLUSH => {}
            _ => return errno::EINVAL,
        }
        if r.flags & !allowed != 0 {
            return errno::EINVAL;
        }
        let writes = matches!(r.cmd, cmd::WRITE | cmd::TRIM | cmd::WRITE_ZEROES);
        if writes && cfg.read_only {
            return errno::EPERM;
        }
        if r.cmd == cmd::FLUSH {
            return 0;
        }
        if r.cmd == cmd::READ && r.len > cfg.max_payload {
            return errno::EOVERFLOW;
        }
        let past_end = r
            .offset
            .checked_add(r.len.into())
            .is_none_or(|end| end > self.sh.size);
        if past_end {
            return if matches!(r.cmd, cmd::WRITE | cmd::WRITE_ZEROES) {
                errno::ENOSPC
            } else {
                errno::EINVAL
            };
        }
        let align = u64::from(cfg.min_block.max(1));
        if !r.offset.is_multiple_of(align) || !u64::from(r.len).is_multiple_of(align) {
            return errno::EINVAL;
        }
        0
    }

    /// Executes one request; false after DISC.
    fn request(&mut self, r: Request) -> R<bool> {
        if r.cmd == cmd::DISC {
            // The requests before it are answered first (proto.md: NBD_CMD_DISC).
            let _ = self.drain_held();
            let _ = self.flush_out();
            return Ok(false);
        }
        if r.cmd == cmd::WRITE && r.len > self.sh.cfg.max_payload {
            return self.fail(format!(
                "WRITE of {} bytes exceeds the maximum payload",
                r.len
            ));
        }
        let error = self.check(&r);
        let fua = r.flags & cmd_flags::FUA != 0;
        if r.cmd == cmd::WRITE {
            self.pending = Some(PendingWrite {
                cookie: r.cookie,
                offset: r.offset,
                len: r.len,
                remaining: r.len,
                fua,
                error,
            });
            self.take_payload()?;
            return Ok(true);
        }
        if error != 0 {
            if let Some(op) = op_of(r.cmd) {
                self.count(op, 0, error);
            }
            self.error_reply(&r, error);
            return Ok(true);
        }
        let store = &self.sh.store;
        let result = match r.cmd {
            cmd::READ => return self.read(&r).map(|()| true),
            cmd::BLOCK_STATUS => {
                self.block_status(&r);
                return Ok(true);
            }
            cmd::FLUSH => store.flush(),
            cmd::TRIM => store.zero(r.offset, r.len.into(), false),
            cmd::WRITE_ZEROES => {
                let keep = r.flags & cmd_flags::NO_HOLE != 0;
                // FAST_ZERO: refused (ENOTSUP) where the zeros would have to be written.
                let zeroed = if r.flags & cmd_flags::FAST_ZERO != 0 {
                    store.zero_fast(r.offset, r.len.into(), keep)
                } else {
                    store.zero(r.offset, r.len.into(), keep)
                };
                zeroed.and_then(|()| if fua { store.flush() } else { Ok(()) })
            }
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        let error = result.err().map_or(0, |e| errno::from_io(&e));
        if let Some(op) = op_of(r.cmd) {
            let bytes = if r.cmd == cmd::FLUSH { 0 } else { r.len.into() };
            self.count(op, bytes, error);
        }
        self.simple(r.cookie, error);
        Ok(true)
    }

    fn error_reply(&mut self, r: &Request, error: u32) {
        if self.structured && matches!(r.cmd, cmd::READ | cmd::BLOCK_STATUS) {
            Chunk::Error {
                error,
                message: b"",
            }
            .encode(chunk::FLAG_DONE, r.cookie, &mut self.out);
        } else {
            self.simple(r.cookie, error);
        }
    }

    fn read(&mut self, r: &Request) -> R<()> {
        let start = self.out.len();
        if self.structured {
            ReplyHeader::Structured {
                flags: chunk::FLAG_DONE,
                kind: chunk::OFFSET_DATA,
                cookie: r.cookie,
                len: r.len + 8,
            }
            .encode(&mut self.out);
            self.out.extend_from_slice(&r.offset.to_be_bytes());
        } else {
            self.simple(r.cookie, 0);
        }
        // Straight into the reply buffer, which is not zero-filled first.
        let read = self
            .sh
            .store
            .read_append(r.offset, r.len as usize, &mut self.out);
        match read {
            Ok(_) => self.count(Op::Read, r.len.into(), 0),
            Err(e) => {
                self.out.truncate(start);
                let error = errno::from_io(&e);
                self.count(Op::Read, 0, error);
                self.error_reply(r, error);
            }
        }
        Ok(())
    }

    /// `base:allocation` of `[offset, offset+len)`: written chunks as data (status 0),
    /// the rest as `HOLE | ZERO`, one extent per run; with `REQ_ONE` only the first run.
    /// The request was checked: `base:allocation` is selected and the range is inside.
    fn block_status(&mut self, r: &Request) {
        let end = r.offset + u64::from(r.len);
        let one = r.flags & cmd_flags::REQ_ONE != 0;
        let mut extents = Vec::new();
        let mut pos = r.offset;
        while pos < end && extents.len() < MAX_EXTENTS {
            let (data, run_end) = self.sh.store.mapped(pos, end - pos);
            let run_end = run_end.clamp(pos + 1, end);
            extents.push(Extent {
                len: (run_end - pos) as u32,
                flags: if data { 0 } else { state::HOLE | state::ZERO },
            });
            pos = run_end;
            if one {
                break;
            }
        }
        BlockStatus {
            context: BASE_ALLOCATION_ID,
            extents,
        }
        .encode(chunk::FLAG_DONE, r.cookie, &mut self.out);
    }
}
