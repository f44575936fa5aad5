//! The [`Queue`] face of a [`Session`], its control PDUs (NOP-Out ping, Logout) and the
//! counters `stats()` reports.

use std::collections::BTreeMap;

use sanbench_io::{Completion, EngineError, Io, Op, Queue, SocketLayer};

use super::discard::TrimBy;

use super::session::{Session, LOGOUT_ITT, NO_TAG, PING_ITT};
use crate::wire::bhs::Bhs;
use crate::wire::framer::encode_pdu;
use crate::wire::pdu_ctl::NopOut;

impl Session {
    /// Appends a control PDU to the output.
    pub(crate) fn push(&mut self, bhs: Bhs, data: &[u8]) {
        self.urgent = true;
        encode_pdu(&mut self.out, &bhs.encode(), &[], data, &self.tx_cfg);
    }

    /// Queues a NOP-Out ping (keep-alive while waiting on a quiet target).
    pub(crate) fn ping(&mut self) {
        self.ping_outstanding = true;
        self.counters.pings += 1;
        let p = NopOut {
            immediate: true,
            lun: 0,
            itt: PING_ITT,
            ttt: NO_TAG,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        };
        self.push(Bhs::NopOut(p), &[]);
    }

    pub(crate) fn logout_request(&mut self) {
        let l = crate::wire::pdu_ctl::LogoutRequest {
            immediate: true,
            reason: crate::wire::codes::logout_reason::CLOSE_SESSION,
            itt: LOGOUT_ITT,
            cid: 0,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        };
        self.push(Bhs::LogoutRequest(l), &[]);
    }

    pub(crate) fn stats_map(&self) -> BTreeMap<String, serde_json::Value> {
        let c = &self.counters;
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: u64| {
            m.insert(format!("iscsi.{k}"), v.into());
        };
        put("commands", c.commands);
        put("data_in_pdus", c.data_in_pdus);
        put("data_out_pdus", c.data_out_pdus);
        put("r2ts", c.r2ts);
        put("window_waits", c.window_waits);
        put("check_conditions", c.check_conditions);
        put("unit_attentions_retried", c.unit_attentions);
        put("other_status", c.other_status);
        put("nop_in_answered", c.nop_in_answered);
        put("pings", c.pings);
        put("async_events", c.async_events);
        put("sends", c.sends);
        put("recvs", c.recvs);
        if let Some(s) = c.last_sense {
            m.insert(
                "iscsi.last_sense".into(),
                format!("key {:#x} asc {:#04x} ascq {:#04x}", s.key, s.asc, s.ascq).into(),
            );
        }
        if let Some(s) = c.last_status {
            m.insert("iscsi.last_status".into(), format!("{s:#04x}").into());
        }
        let layer = match &self.link.ring {
            Some(_) => SocketLayer::Uring,
            None => SocketLayer::Poll,
        };
        m.insert("iscsi.socket".into(), layer.name().into());
        if let Some(r) = &self.link.ring {
            m.insert("iscsi.ring_enters".into(), r.enters().into());
            m.insert("iscsi.ring_setup".into(), r.mode().into());
            let kind = sanbench_io::sockring::ring_kind(r.shared());
            m.insert("iscsi.socket_ring".into(), kind.into());
        }
        if let Some(f) = &self.socket_fallback {
            m.insert("iscsi.socket_fallback".into(), f.as_str().into());
        }
        m
    }
}

impl Queue for Session {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let unmap = self.disc.trim == Some(TrimBy::Unmap);
        if unmap && ios.iter().any(|io| io.op == Op::Trim) {
            // One UNMAP for the batch's trims, the rest as they come.
            let (trims, rest): (Vec<Io>, Vec<Io>) = ios.iter().partition(|io| io.op == Op::Trim);
            self.submit_trims(&trims)?;
            return self.submit(&rest);
        }
        for io in ios {
            match self.build(io) {
                Ok(cmd) => self.enqueue(cmd)?,
                Err(errno) => self.done.push(Completion {
                    tag: io.tag,
                    result: errno,
                }),
            }
        }
        self.flush_due()
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        self.wait_for(min)?;
        out.append(&mut self.done);
        Ok(())
    }

    fn reap_until(
        &mut self,
        deadline: std::time::Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        self.wait_until(deadline)?;
        out.append(&mut self.done);
        Ok(())
    }

    fn readiness(&self) -> Option<sanbench_io::Readiness<'_>> {
        use std::os::fd::AsFd;
        if let Some(r) = &self.link.ring {
            return Some(sanbench_io::Readiness {
                fd: r.fd(),
                write: false,
                // Entries not submitted, no receive in the kernel or bytes received and not
                // yet handled make no completion on the ring: reap(0) has to look first.
                held: !self.done.is_empty() || (self.outstanding() > 0 && r.needs_look()),
            });
        }
        Some(sanbench_io::Readiness {
            fd: self.link.stream.as_fd(),
            write: self.blocked,
            held: !self.done.is_empty(),
        })
    }

    fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        self.stats_map()
    }

    fn close(&mut self) -> Result<(), EngineError> {
        self.logout()
    }
}

impl Drop for Session {
    /// The ring may still hold a receive into the receive buffer and a send of the output:
    /// both are cancelled and waited out before the buffers go.
    fn drop(&mut self) {
        self.link.ring_drop(&mut self.rx, self.logged_out);
    }
}
