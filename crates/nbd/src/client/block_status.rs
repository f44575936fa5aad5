//! [`Target::allocation`](sanbench_io::Target::allocation) for NBD exports: which part of a
//! range the server reports as holes, through the `base:allocation` metadata context
//! (proto.md "Metadata contexts", "`NBD_CMD_BLOCK_STATUS`").
//!
//! The query runs on a connection of its own, opened for it and closed after it: the data-path
//! queues never negotiate a metadata context, so nothing about them changes. Structured
//! replies are required for block status, so this connection asks for them whatever the
//! options say. A server that does not select `base:allocation` (nbdkit plugins without
//! extents still do; old servers answer `NBD_REP_ERR_UNSUP`) gets `None`.
//!
//! The range goes out in requests of at most 2 GiB (lengths are 32 bits; a power of two keeps
//! every piece a multiple of the export's minimum block size), one at a time; a server may
//! answer for less than asked, so the next request starts where its answer ended.

use std::io::{self, Read, Write};

use sanbench_io::{Allocation, EngineError};

use super::{connect, disconnect, NbdTarget, Stream};
use crate::wire::meta::{state, BlockStatus, Extent, BASE_ALLOCATION};
use crate::wire::transmission::{chunk, cmd, Chunk, ReplyHeader, Request};
use crate::wire::Parsed;

/// Largest single BLOCK_STATUS request.
const MAX_QUERY: u64 = 1 << 31;

/// What `Allocation::method` says for NBD.
pub const METHOD: &str = "NBD base:allocation";

/// Bytes covered and bytes reported as holes by one reply's extents, counting no further than
/// `want` (a server may let the last extent run past the request).
pub(crate) fn tally(extents: impl Iterator<Item = Extent>, want: u64) -> (u64, u64) {
    let (mut covered, mut holes) = (0u64, 0u64);
    for e in extents {
        let n = u64::from(e.len).min(want - covered);
        covered += n;
        if e.flags & state::HOLE != 0 {
            holes += n;
        }
        if covered == want {
            break;
        }
    }
    (covered, holes)
}

/// Asks the server which part of `[offset, offset + len)` (clipped to the export) is holes.
pub(crate) fn allocation(
    t: &NbdTarget,
    offset: u64,
    len: u64,
) -> Result<Option<Allocation>, EngineError> {
    let end = offset.saturating_add(len).min(t.info.size);
    let start = offset.min(end);
    let mut opts = t.opts.clone();
    opts.structured_replies = true;
    let (sock, neg, rest) = connect(
        &t.addr,
        &t.export,
        &opts,
        t.tls.as_ref(),
        Some(BASE_ALLOCATION),
    )?;
    let mut conn = Conn {
        sock,
        buf: rest,
        peer: t.addr.to_string(),
    };
    let Some(ctx) = neg.meta_context else {
        disconnect(&mut conn.sock);
        return Ok(None);
    };
    let align = u64::from(neg.block_sizes.map_or(1, |b| b.0).max(1));
    let (mut pos, mut holes, mut cookie) = (start, 0u64, 0u64);
    while pos < end {
        let mut want = (end - pos).min(MAX_QUERY);
        if want < end - pos && want > align {
            want -= want % align;
        }
        cookie += 1;
        let mut req = Vec::with_capacity(28);
        Request {
            flags: 0,
            cmd: cmd::BLOCK_STATUS,
            cookie,
            offset: pos,
            len: want as u32,
        }
        .encode(&mut req);
        conn.sock
            .write_all(&req)
            .map_err(|e| conn.io_err(e, "sending NBD_CMD_BLOCK_STATUS"))?;
        let (covered, h) = conn.reply(cookie, ctx, pos, want)?;
        pos += covered;
        holes += h;
    }
    disconnect(&mut conn.sock);
    Ok(Some(Allocation {
        method: METHOD.into(),
        checked_bytes: end - start,
        unwritten_bytes: holes,
    }))
}

struct Conn {
    sock: Stream,
    buf: Vec<u8>,
    peer: String,
}

impl Conn {
    fn protocol(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Protocol {
            peer: self.peer.clone(),
            reason: reason.into(),
        }
    }

    fn io_err(&self, e: io::Error, doing: &str) -> EngineError {
        EngineError::Disconnected {
            peer: self.peer.clone(),
            reason: format!("{doing}: {e}"),
        }
    }

    /// Makes the first `n` bytes of the buffer valid, reading as needed.
    fn fill(&mut self, n: usize) -> Result<(), EngineError> {
        while self.buf.len() < n {
            let have = self.buf.len();
            self.buf.resize(n, 0);
            match self.sock.read(&mut self.buf[have..]) {
                Ok(0) => {
                    self.buf.truncate(have);
                    return Err(self.io_err(
                        io::ErrorKind::UnexpectedEof.into(),
                        "reading a block status reply",
                    ));
                }
                Ok(k) => self.buf.truncate(have + k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.buf.truncate(have),
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(self.io_err(e, "reading a block status reply"));
                }
            }
        }
        Ok(())
    }

    /// Reads the whole reply to request `cookie` and returns its (covered, holes).
    fn reply(
        &mut self,
        cookie: u64,
        ctx: u32,
        offset: u64,
        want: u64,
    ) -> Result<(u64, u64), EngineError> {
        let mut answer = None;
        loop {
            let (h, hlen) = loop {
                match ReplyHeader::decode(&self.buf) {
                    Ok(Parsed::Done { value, len }) => break (value, len),
                    Ok(Parsed::Incomplete { needed }) => self.fill(needed)?,
                    Err(e) => return Err(self.protocol(e.to_string())),
                }
            };
            if h.cookie() != cookie {
                return Err(self.protocol(format!(
                    "reply for cookie {} while waiting for {cookie}",
                    h.cookie()
                )));
            }
            let (flags, kind, plen) = match h {
                ReplyHeader::Simple { error, .. } => {
                    self.buf.drain(..hlen);
                    return Err(self.protocol(format!(
                        "NBD_CMD_BLOCK_STATUS at offset {offset} got a simple reply (error {error}), \
                         not a block status chunk"
                    )));
                }
                ReplyHeader::Structured {
                    flags, kind, len, ..
                } => (flags, kind, len as usize),
            };
            self.fill(hlen + plen)?;
            let payload = &self.buf[hlen..hlen + plen];
            match kind {
                chunk::BLOCK_STATUS => {
                    let bs =
                        BlockStatus::decode(payload).map_err(|e| self.protocol(e.to_string()))?;
                    if bs.context == ctx {
                        if answer.is_some() {
                            return Err(self.protocol("two block status chunks for one context"));
                        }
                        answer = Some(tally(bs.extents.iter().copied(), want));
                    }
                }
                chunk::NONE => {}
                k => {
                    let reason = match Chunk::decode(k, payload) {
                        Ok(Chunk::Error { error, message })
                        | Ok(Chunk::ErrorOffset { error, message, .. }) => format!(
                            "NBD_CMD_BLOCK_STATUS at offset {offset} failed: error {error} {}",
                            String::from_utf8_lossy(message)
                        ),
                        _ => format!("unexpected chunk type {k} in a block status reply"),
                    };
                    return Err(self.protocol(reason));
                }
            }
            self.buf.drain(..hlen + plen);
            if flags & chunk::FLAG_DONE != 0 {
                break;
            }
        }
        match answer {
            Some((covered, holes)) if covered > 0 => Ok((covered, holes)),
            _ => Err(self.protocol(format!(
                "no base:allocation extents in the reply to NBD_CMD_BLOCK_STATUS at offset {offset}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(len: u32, flags: u32) -> Extent {
        Extent { len, flags }
    }

    #[test]
    fn tally_counts_holes_within_the_request() {
        let ext = [e(4096, 0), e(8192, state::HOLE | state::ZERO), e(4096, 0)];
        assert_eq!(tally(ext.into_iter(), 16384), (16384, 8192));
        // A short answer covers less; the caller asks again from there.
        assert_eq!(tally(ext[..2].iter().copied(), 1 << 20), (12288, 8192));
        // The last extent may run past the request: counted only up to it.
        assert_eq!(
            tally([e(4096, 0), e(1 << 30, 1)].into_iter(), 8192),
            (8192, 4096)
        );
        // ZERO alone is written data that reads as zeroes, not a hole.
        assert_eq!(tally([e(512, state::ZERO)].into_iter(), 512), (512, 0));
    }
}
