//! The admin queue's side of Asymmetric Namespace Access, as Linux's host does it: when
//! Identify Controller sets CMIC bit 3 it reads the ANA log page (all namespaces, with their
//! NSID lists, as long as NANAGRPID and MNAN make it: `nvme_mpath_init_identify`,
//! `nvme_read_ana_log`) and finds its namespace's group by the ANAGRPID of Identify
//! Namespace; when OAES bit 11 says the controller sends ANA change notices it enables them
//! (Set Features 0Bh) and keeps one Asynchronous Event Request outstanding
//! (`nvme_enable_aen`), whose completion says to read the page again.
//!
//! The request's completion may arrive while the session waits for another command, so the
//! session's [`exec`](AdminSession::exec) keeps it aside ([`take_event`], in the session
//! module beside the request's command id) and [`take_events`](AdminSession::take_events)
//! hands it over and sends the next request.

use super::conn::Event;
use super::session::{take_event, AdminSession, AER_CID};
use super::HostError;
use crate::wire::ana::{aen, cmic, AnaLog, AnaState, LID};
use crate::wire::cmd::{feature, set_features_sqe, Command, DataPtr};

/// The longest ANA log page read (a controller that claims more groups and namespaces than
/// fit is read up to this).
const MAX_LOG: usize = 1 << 20;

/// Whether an event's dword 0 is an ANA change notice.
pub fn is_ana_change(dw0: u32) -> bool {
    let (kind, info, _) = aen::decode(dw0);
    kind == aen::TYPE_NOTICE && info == aen::NOTICE_ANA_CHANGE
}

impl AdminSession {
    /// Whether the controller reports ANA states for the session's namespace (CMIC bit 3).
    pub fn reports_ana(&self) -> bool {
        self.ns.is_some() && self.id.cmic & cmic::ANA != 0
    }

    /// The ANA log page, read as Linux reads it: every namespace (NSID FFFFFFFFh), NSID lists
    /// included, `16 + NANAGRPID × 32 + MNAN × 4` bytes (NN when MNAN is 0), at most MDTS.
    pub fn ana_log(&mut self) -> Result<AnaLog, HostError> {
        let mnan = if self.id.mnan != 0 {
            self.id.mnan
        } else {
            self.id.nn
        };
        let mdts = match self.id.mdts {
            0 => MAX_LOG,
            m => 4096usize.checked_shl(m as u32).unwrap_or(MAX_LOG),
        };
        let len = AnaLog::max_len(self.id.nanagrpid.max(1), mnan)
            .min(mdts)
            .min(MAX_LOG);
        let b = self.log_page_with(LID, 0, u32::MAX, len as u32)?;
        Ok(AnaLog::decode(&b)?)
    }

    /// The ANA state of the session's namespace through this controller, `None` when the
    /// controller reports none. Reading the page also re-arms its change notice.
    pub fn ana_state(&mut self) -> Result<Option<AnaState>, HostError> {
        if !self.reports_ana() {
            return Ok(None);
        }
        let grp = self.ns.as_ref().map_or(0, |n| n.anagrpid);
        let nsid = self.nsid;
        let log = self.ana_log()?;
        log.state_of(grp, nsid).map(Some).ok_or_else(|| {
            HostError::Protocol(format!(
                "the ANA log page has no group {grp} and does not list namespace {nsid}"
            ))
        })
    }

    /// Turns ANA change notices on when the controller offers them (OAES bit 11) and sends
    /// the Asynchronous Event Request they complete; false when there are none to have.
    pub fn enable_ana_events(&mut self) -> Result<bool, HostError> {
        if !self.reports_ana() || self.id.oaes & aen::CFG_ANA_CHANGE == 0 {
            return Ok(false);
        }
        let cid = self.next_cid();
        let s = set_features_sqe(cid, feature::ASYNC_EVENT_CONFIG, aen::CFG_ANA_CHANGE);
        self.exec(
            "Set Features (Asynchronous Event Configuration)",
            s,
            &[],
            &mut [],
        )?;
        self.submit_aer()?;
        Ok(true)
    }

    /// Sends an Asynchronous Event Request unless one is outstanding.
    pub fn submit_aer(&mut self) -> Result<(), HostError> {
        if self.aer_out {
            return Ok(());
        }
        let s = Command::AsyncEvent.to_sqe(AER_CID, DataPtr::Transport { len: 0 });
        self.conn.send_cmd(s, &[]);
        self.conn.flush()?;
        self.aer_out = true;
        Ok(())
    }

    /// The events reported since the last call (each completion's dword 0), without waiting;
    /// after one, the next request is sent.
    pub fn take_events(&mut self) -> Result<Vec<u32>, HostError> {
        while self.aer_out {
            if !self.conn.has_pdu() {
                if self.conn.try_fill()? {
                    continue;
                }
                break;
            }
            let (aer_out, events) = (&mut self.aer_out, &mut self.events);
            match self.conn.recv()? {
                Event::Resp(q) if take_event(&q, aer_out, events) => {}
                other => {
                    return Err(HostError::Protocol(format!(
                        "unexpected PDU on the admin queue while idle: {other:?}"
                    )))
                }
            }
        }
        let ev = std::mem::take(&mut self.events);
        if !ev.is_empty() {
            self.submit_aer()?;
        }
        Ok(ev)
    }
}
