//! The I/O loop of a [`Session`]: send what is queued without blocking, receive in large
//! pieces, frame and handle every complete PDU, and give up when nothing completes within the
//! I/O timeout.
//!
//! On the fast path a batch costs one `send` and, per wake-up, one `recv` that usually carries
//! many responses. Only while output is stuck behind a full socket does the loop `poll` for both
//! directions, so that it keeps draining the target's responses (which unblocks the target,
//! which unblocks our send) instead of deadlocking on two full socket buffers.

use std::time::{Duration, Instant};

use sanbench_io::EngineError;

use super::link::{Recv, RecvBuf};
use super::session::{Cmd, Session};

/// Longest commands held for company (`submit_batch`) wait for a response before they are sent
/// alone.
const HOLD_MAX: Duration = Duration::from_micros(50);

impl Session {
    /// Sends as much queued output as the socket takes without blocking.
    pub(crate) fn flush(&mut self) -> Result<(), EngineError> {
        self.blocked = false;
        if self.link.ring.is_some() {
            return self.ring_flush();
        }
        while self.sent < self.out.len() {
            let n = self.link.send_some(&self.out[self.sent..])?;
            self.counters.sends += 1;
            if n == 0 {
                self.blocked = true;
                break;
            }
            self.sent += n;
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            self.unsent_cmds = 0;
            self.urgent = false;
        }
        Ok(())
    }

    /// `flush` on a ring: the output goes to one SEND, submitted by the next wait; while the
    /// last one is still in the kernel the output waits as it would behind a full socket.
    fn ring_flush(&mut self) -> Result<(), EngineError> {
        if self.out.is_empty() {
            return Ok(());
        }
        if !self.link.ring_send(&mut self.rx, &mut self.out)? {
            self.blocked = true;
            return Ok(());
        }
        self.counters.sends += 1;
        self.sent = 0;
        self.unsent_cmds = 0;
        self.urgent = false;
        Ok(())
    }

    /// Flushes unless new commands may wait for company: with more than half the depth still
    /// on the wire the target is busy anyway, and sending several commands in one segment saves
    /// a send and a target wake-up per command (fio's `iodepth_batch_submit`). Output that
    /// someone waits for (R2T data, NOP and Logout PDUs) always goes at once.
    pub(crate) fn flush_due(&mut self) -> Result<(), EngineError> {
        let on_wire = self.inflight - self.unsent_cmds.min(self.inflight);
        let due = self.urgent
            || self.sent > 0
            || self.unsent_cmds >= self.submit_batch
            || on_wire <= self.depth() / 2;
        if due && !self.out.is_empty() {
            self.flush()?;
        }
        Ok(())
    }

    /// Frames and handles every complete PDU in the receive buffer.
    fn process(&mut self) -> Result<(), EngineError> {
        // The PDUs borrow the buffer while their handlers need `&mut self`: take the buffer
        // out for the duration (a move of three words, no copy).
        let rx = std::mem::replace(&mut self.rx, RecvBuf::empty());
        let r = self.process_from(&rx);
        let consumed = r.as_ref().map_or(0, |n| *n);
        self.rx = rx;
        self.rx.consume(consumed);
        r.map(|_| ())
    }

    fn process_from(&mut self, rx: &RecvBuf) -> Result<usize, EngineError> {
        let mut used = 0;
        loop {
            let parsed = rx
                .parse_at(used, &self.rx_cfg)
                .map_err(|e| self.link.proto(format!("framing: {e}")))?;
            let Some((pdu, n)) = parsed else {
                return Ok(used);
            };
            self.on_pdu(pdu)?;
            used += n;
        }
    }

    /// One round of waiting: receive (and send, if output is pending) for at most one tick.
    /// Returns true when bytes arrived.
    fn round(&mut self) -> Result<bool, EngineError> {
        self.flush_due()?;
        let got = if self.blocked {
            let tick = self.link.tick();
            let (readable, _) = self.link.wait(&mut self.rx, true, tick)?;
            if readable {
                self.link.recv(&mut self.rx, false)?
            } else {
                Recv::Idle
            }
        } else {
            // Commands held for company wait only as long as a response is about to arrive:
            // on a slow target the wait for the next completion would land in their latency.
            if self.unsent_cmds > 0 && !self.link.readable_within(&mut self.rx, HOLD_MAX)? {
                self.flush()?;
            }
            self.link.recv(&mut self.rx, true)?
        };
        match got {
            Recv::Data => {
                self.counters.recvs += 1;
                self.process()?;
                Ok(true)
            }
            Recv::Idle => Ok(false),
        }
    }

    fn timeout(&self, limit: Duration) -> EngineError {
        EngineError::Timeout {
            peer: format!(
                "{} ({} I/Os outstanding{})",
                self.link.peer,
                self.outstanding(),
                if self.ping_outstanding {
                    ", NOP-Out ping unanswered"
                } else {
                    ""
                }
            ),
            secs: limit.as_secs_f64(),
        }
    }

    /// `Queue::reap_until`: waits in ppoll until a completion is buffered or `deadline`
    /// passes. Held commands go out first (an open loop's command waits on its schedule, not
    /// for company); with the socket full it only polls.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> Result<(), EngineError> {
        if self.unsent_cmds > 0 && !self.blocked {
            self.flush()?;
        }
        self.wait_for(0)?;
        while self.done.is_empty() && self.outstanding() > 0 && !self.blocked {
            let now = Instant::now();
            if now >= deadline || !self.link.readable_within(&mut self.rx, deadline - now)? {
                break;
            }
            if let Recv::Data = self.link.recv(&mut self.rx, false)? {
                self.counters.recvs += 1;
                self.process()?;
            }
        }
        Ok(())
    }

    /// Waits until `min` completions are buffered (fewer when fewer are outstanding).
    pub(crate) fn wait_for(&mut self, min: usize) -> Result<(), EngineError> {
        let want = min.min(self.done.len() + self.outstanding());
        if want == 0 || self.done.len() >= want {
            // Still push output and take what has arrived: a poll, not a wait.
            self.flush_due()?;
            if let Recv::Data = self.link.recv(&mut self.rx, false)? {
                self.counters.recvs += 1;
                self.process()?;
            }
            return Ok(());
        }
        let mut seen = self.done.len();
        let mut last = Instant::now();
        let mut pinged = false;
        while self.done.len() < want {
            self.round()?;
            if self.done.len() > seen {
                seen = self.done.len();
                last = Instant::now();
                continue;
            }
            let idle = last.elapsed();
            if idle >= self.io_timeout {
                return Err(self.timeout(self.io_timeout));
            }
            if idle >= self.io_timeout / 2 && !pinged && !self.ping_outstanding {
                pinged = true;
                self.ping();
            }
        }
        Ok(())
    }

    /// Runs one internal command to completion (used by the probe at open time). Returns the
    /// completion result and the number of Data-In bytes received.
    pub(crate) fn run_sync(&mut self, cmd: Cmd) -> Result<(i32, u32), EngineError> {
        let tag = cmd.tag;
        self.enqueue(cmd)?;
        loop {
            self.wait_for(1)?;
            if let Some(i) = self.done.iter().position(|c| c.tag == tag) {
                let c = self.done.swap_remove(i);
                return Ok((c.result, self.got(tag)));
            }
        }
    }

    /// Sends Logout (close the session) and waits, bounded, for the response.
    pub(crate) fn logout(&mut self) -> Result<(), EngineError> {
        if self.logged_out {
            return Ok(());
        }
        self.logout_request();
        let limit = self.io_timeout.min(Duration::from_secs(5));
        let start = Instant::now();
        while !self.logged_out {
            self.round()?;
            if start.elapsed() >= limit {
                return Err(self.timeout(limit));
            }
        }
        let _ = self.link.stream.shutdown(std::net::Shutdown::Both);
        Ok(())
    }
}
