//! Bringing a controller up as Linux's host does (nvme_tcp_setup_ctrl, nvme_enable_ctrl,
//! nvme_init_identify): Connect on the admin queue with a dynamic controller id, Property Get
//! CAP, Property Set CC.EN, poll CSTS.RDY within CAP.TO, Identify controller and namespace,
//! Set Features (number of queues, keep-alive); then Connect each I/O queue with that id.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::conn::{Connection, Event, HostOptions};
use super::HostError;
use crate::wire::cmd::{
    feature, identify_sqe, property_get_sqe, property_set_sqe, set_features_sqe, Command, DataPtr,
};
use crate::wire::discovery;
use crate::wire::fabrics::{prop, Connect, ConnectData, CATTR_DISABLE_SQ_FLOW, CONNECT_DATA_LEN};
use crate::wire::header::{Cqe, Sqe};
use crate::wire::identify::{cns, IdCtrl, IdNs, IDENTIFY_LEN};
use crate::wire::status::Status;
use zerocopy::IntoBytes;

/// Runs one command to completion on an otherwise idle connection: `out` is sent (in the
/// capsule when it fits `in_capsule`, else on R2Ts), C2HData lands in `inbuf`.
pub fn exec(c: &mut Connection, s: Sqe, out: &[u8], inbuf: &mut [u8]) -> Result<Cqe, HostError> {
    exec_with(c, s, out, inbuf, &mut |_| false)
}

/// [`exec`] on a connection where another command may complete meanwhile (an Asynchronous
/// Event Request held by the controller): a CapsuleResp for another command id goes to
/// `aside`, which returns whether it expected it.
pub fn exec_with(
    c: &mut Connection,
    mut s: Sqe,
    out: &[u8],
    inbuf: &mut [u8],
    aside: &mut dyn FnMut(&Cqe) -> bool,
) -> Result<Cqe, HostError> {
    let cid = s.command_id.get();
    let inline = !out.is_empty() && out.len() <= c.in_capsule;
    if !out.is_empty() && !inline {
        s.dptr = DataPtr::Transport {
            len: out.len() as u32,
        }
        .to_desc();
    } else if !inbuf.is_empty() {
        s.dptr = DataPtr::Transport {
            len: inbuf.len() as u32,
        }
        .to_desc();
    }
    c.send_cmd(s, if inline { out } else { &[] });
    c.flush()?;
    loop {
        match c.recv()? {
            Event::R2t {
                cid: rc,
                ttag,
                offset,
                len,
            } if rc == cid => {
                let (o, l) = (offset as usize, len as usize);
                let Some(piece) = out.get(o..o.saturating_add(l)) else {
                    return Err(HostError::Protocol(format!(
                        "R2T for {l} bytes at {o} of a {}-byte write",
                        out.len()
                    )));
                };
                let piece = piece.to_vec();
                c.send_h2c(cid, ttag, offset, &piece);
                c.flush()?;
            }
            Event::Data {
                cid: dc,
                offset,
                data,
                success,
            } if dc == cid => {
                let o = offset as usize;
                let Some(dst) = inbuf.get_mut(o..o.saturating_add(data.len())) else {
                    return Err(HostError::Protocol(format!(
                        "C2HData of {} bytes at {o} beyond the {}-byte buffer",
                        data.len(),
                        inbuf.len()
                    )));
                };
                dst.copy_from_slice(data);
                if success {
                    let mut q = Cqe {
                        result: 0.into(),
                        sq_head: 0.into(),
                        sq_id: 0.into(),
                        command_id: cid.into(),
                        status: 0.into(),
                    };
                    q.command_id.set(cid);
                    return Ok(q);
                }
            }
            Event::Resp(q) if q.command_id.get() == cid => return Ok(q),
            Event::Resp(q) if aside(&q) => {}
            other => {
                return Err(HostError::Protocol(format!(
                    "unexpected PDU while waiting for command {cid}: {other:?}"
                )))
            }
        }
    }
}

/// `exec`, failing on a non-success status.
pub fn exec_ok(
    c: &mut Connection,
    op: &'static str,
    s: Sqe,
    out: &[u8],
    inbuf: &mut [u8],
) -> Result<Cqe, HostError> {
    let q = exec(c, s, out, inbuf)?;
    let status = Status::from_field(q.status.get());
    if !status.is_success() {
        return Err(HostError::Status { op, status });
    }
    Ok(q)
}

/// Connect one queue; returns the controller id.
pub fn connect_queue(
    c: &mut Connection,
    o: &HostOptions,
    subnqn: &str,
    cntlid: u16,
    qid: u16,
    entries: u16,
) -> Result<u16, HostError> {
    connect_queue_with(c, o, subnqn, cntlid, qid, entries, 0)
}

/// [`connect_queue`] with Connect attributes (`cattr`).
pub fn connect_queue_with(
    c: &mut Connection,
    o: &HostOptions,
    subnqn: &str,
    cntlid: u16,
    qid: u16,
    entries: u16,
    cattr: u8,
) -> Result<u16, HostError> {
    let conn = Connect {
        recfmt: 0,
        qid,
        sqsize: entries.max(2) - 1,
        cattr,
        kato: if qid == 0 { o.kato_ms } else { 0 },
        data_len: CONNECT_DATA_LEN as u32,
    };
    let data = ConnectData::new(o.hostid, cntlid, subnqn, &o.hostnqn)?;
    let q = exec_ok(c, "Connect", conn.to_sqe(0), data.as_bytes(), &mut [])?;
    Ok(q.result.get() as u16)
}

/// An enabled controller's admin queue and what Identify said.
pub struct AdminSession {
    pub conn: Connection,
    pub cntlid: u16,
    pub cap: u64,
    pub id: IdCtrl,
    /// The namespace asked for (`None` on a discovery controller).
    pub ns: Option<IdNs>,
    pub nsid: u32,
    /// I/O queues granted by Set Features (Number of Queues).
    pub queues: u16,
    next_cid: u16,
    /// An Asynchronous Event Request is held by the controller (`host/ana.rs`).
    pub(crate) aer_out: bool,
    /// Events reported (completion dword 0), not yet taken.
    pub(crate) events: Vec<u32>,
}

/// The command id of the one Asynchronous Event Request a session keeps outstanding; no
/// other command of the session uses it.
pub(crate) const AER_CID: u16 = 15;

/// Keeps the held Asynchronous Event Request's completion (true), or leaves `q` to the caller
/// (false). A request that completes with an error is not sent again.
pub(crate) fn take_event(q: &Cqe, aer_out: &mut bool, events: &mut Vec<u32>) -> bool {
    if q.command_id.get() != AER_CID || !*aer_out {
        return false;
    }
    *aer_out = false;
    if Status::from_field(q.status.get()).is_success() {
        events.push(q.result.get() as u32);
    }
    true
}

impl AdminSession {
    pub fn next_cid(&mut self) -> u16 {
        self.next_cid = self.next_cid.wrapping_add(1);
        if self.next_cid == AER_CID {
            self.next_cid += 1;
        }
        self.next_cid
    }

    /// Runs one admin command; an event reported meanwhile is kept for
    /// [`take_events`](Self::take_events).
    pub fn exec(
        &mut self,
        op: &'static str,
        s: Sqe,
        out: &[u8],
        inbuf: &mut [u8],
    ) -> Result<Cqe, HostError> {
        let (aer_out, events) = (&mut self.aer_out, &mut self.events);
        let q = exec_with(&mut self.conn, s, out, inbuf, &mut |q| {
            take_event(q, aer_out, events)
        })?;
        let status = Status::from_field(q.status.get());
        if !status.is_success() {
            return Err(HostError::Status { op, status });
        }
        Ok(q)
    }

    pub fn keep_alive(&mut self) -> Result<(), HostError> {
        let cid = self.next_cid();
        let s = Command::KeepAlive.to_sqe(cid, DataPtr::Transport { len: 0 });
        self.exec("Keep Alive", s, &[], &mut [])?;
        Ok(())
    }

    /// Identify Namespace again (NUSE changes as the host writes).
    pub fn identify_namespace(&mut self) -> Result<IdNs, HostError> {
        let cid = self.next_cid();
        let mut b = vec![0u8; IDENTIFY_LEN];
        let s = identify_sqe(cid, cns::NAMESPACE, self.nsid, 4096);
        self.exec("Identify Namespace", s, &[], &mut b)?;
        Ok(IdNs::decode(&b)?)
    }

    /// A log page of `len` bytes (the discovery log: LID 0x70).
    pub fn log_page(&mut self, lid: u8, len: u32) -> Result<Vec<u8>, HostError> {
        self.log_page_with(lid, 0, 0, len)
    }

    /// A log page with a Log Specific Parameter, for namespace `nsid` (0xffffffff: all), as
    /// Linux's `nvme_get_log` asks for it (RAE clear: reading clears the event that announced
    /// it).
    pub fn log_page_with(
        &mut self,
        lid: u8,
        lsp: u8,
        nsid: u32,
        len: u32,
    ) -> Result<Vec<u8>, HostError> {
        let cid = self.next_cid();
        let s = Command::GetLogPage {
            lid,
            lsp,
            rae: false,
            numd: (len / 4) as u64,
            offset: 0,
            nsid,
        }
        .to_sqe(cid, DataPtr::Transport { len });
        let mut b = vec![0u8; len as usize];
        self.exec("Get Log Page", s, &[], &mut b)?;
        Ok(b)
    }

    /// The discovery log's generation counter and records, read as Linux's host reads it
    /// (nvme_get_log in nvmf_get_log_page_discovery): the header for NUMREC, then the whole
    /// page, again if the generation counter moved in between. At most 1024 records.
    pub fn discovery_log(&mut self) -> Result<(u64, Vec<discovery::Record>), HostError> {
        let mut tries = 0;
        loop {
            let h = self.log_page(discovery::LID, discovery::HEADER_LEN as u32)?;
            let (genctr, numrec) = discovery::decode_header(&h)?;
            let n = numrec.min(1024) as usize;
            let len = discovery::HEADER_LEN + n * discovery::ENTRY_LEN;
            let page = self.log_page(discovery::LID, len as u32)?;
            let (g2, recs) = discovery::decode(&page)?;
            tries += 1;
            if g2 == genctr || tries == 3 {
                return Ok((g2, recs));
            }
        }
    }
}

/// Brings up a controller of `subnqn` at `addr` and identifies namespace `nsid` (none for the
/// discovery NQN), asking for `io_queues` I/O queues.
pub fn connect_admin(
    addr: SocketAddr,
    subnqn: &str,
    nsid: u32,
    io_queues: u16,
    o: &HostOptions,
) -> Result<AdminSession, HostError> {
    let mut c = Connection::open(addr, o)?;
    c.in_capsule = CONNECT_DATA_LEN;
    let cntlid = connect_queue(&mut c, o, subnqn, 0xffff, 0, 32)?;
    let cap = exec_ok(
        &mut c,
        "Property Get CAP",
        property_get_sqe(1, prop::CAP, true),
        &[],
        &mut [],
    )?
    .result
    .get();
    exec_ok(
        &mut c,
        "Property Set CC",
        property_set_sqe(2, prop::CC, prop::CC_ENABLE as u64, false),
        &[],
        &mut [],
    )?;
    let deadline = Instant::now() + Duration::from_millis(prop::cap_timeout_ms(cap).max(500));
    loop {
        let csts = exec_ok(
            &mut c,
            "Property Get CSTS",
            property_get_sqe(3, prop::CSTS, false),
            &[],
            &mut [],
        )?
        .result
        .get() as u32;
        if csts & prop::CSTS_CFS != 0 {
            return Err(HostError::Protocol(
                "controller fatal status (CSTS.CFS)".into(),
            ));
        }
        if csts & prop::CSTS_RDY != 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(HostError::Timeout("CSTS.RDY after CC.EN"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut b = vec![0u8; IDENTIFY_LEN];
    exec_ok(
        &mut c,
        "Identify Controller",
        identify_sqe(4, cns::CONTROLLER, 0, 4096),
        &[],
        &mut b,
    )?;
    let id = IdCtrl::decode(&b)?;
    let discovery = id.cntrltype == crate::wire::identify::CNTRLTYPE_DISCOVERY;
    let (ns, queues) = if discovery {
        (None, 0)
    } else {
        exec_ok(
            &mut c,
            "Identify Namespace",
            identify_sqe(5, cns::NAMESPACE, nsid, 4096),
            &[],
            &mut b,
        )?;
        let ns = IdNs::decode(&b)?;
        if ns.nsze == 0 || ns.block_size() < 512 {
            return Err(HostError::Protocol(format!(
                "namespace {nsid} is not active"
            )));
        }
        let n = io_queues.max(1) as u32 - 1;
        let q = exec_ok(
            &mut c,
            "Set Features (Number of Queues)",
            set_features_sqe(6, feature::NUM_QUEUES, n | n << 16),
            &[],
            &mut [],
        )?;
        let r = q.result.get() as u32;
        let granted = ((r & 0xffff).min(r >> 16) + 1).min(io_queues.max(1) as u32) as u16;
        (Some(ns), granted)
    };
    if o.kato_ms != 0 {
        exec_ok(
            &mut c,
            "Set Features (KATO)",
            set_features_sqe(7, feature::KATO, o.kato_ms),
            &[],
            &mut [],
        )?;
    }
    Ok(AdminSession {
        conn: c,
        cntlid,
        cap,
        id,
        ns,
        nsid,
        queues,
        next_cid: 16,
        aer_out: false,
        events: Vec::new(),
    })
}

/// Connects I/O queue `qid` of the controller with `entries` entries. Asks to disable SQ
/// flow control (a read then completes with its last C2HData, one PDU fewer per read; the
/// host never needed SQ head pointers: it keeps no more commands in flight than entries);
/// a controller that refuses gets a plain Connect on a new connection.
pub fn connect_io(
    addr: SocketAddr,
    subnqn: &str,
    a: &AdminSession,
    qid: u16,
    entries: u16,
    o: &HostOptions,
) -> Result<Connection, HostError> {
    let mqes = prop::cap_mqes(a.cap).min(a.id.maxcmd.max(2) as u32) as u16;
    let mut c = Connection::open(addr, o)?;
    c.in_capsule = CONNECT_DATA_LEN;
    let entries = entries.min(mqes);
    let flags = CATTR_DISABLE_SQ_FLOW;
    match connect_queue_with(&mut c, o, subnqn, a.cntlid, qid, entries, flags) {
        Ok(_) => c.sqflow_disabled = true,
        Err(HostError::Status { .. }) => {
            c = Connection::open(addr, o)?;
            c.in_capsule = CONNECT_DATA_LEN;
            connect_queue(&mut c, o, subnqn, a.cntlid, qid, entries)?;
        }
        Err(e) => return Err(e),
    }
    // IOCCSZ counts 16-byte units of the whole capsule, the 64-byte SQE included.
    c.in_capsule = (a.id.ioccsz as usize * 16).saturating_sub(64);
    Ok(c)
}
