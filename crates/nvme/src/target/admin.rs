//! The admin queue: Fabrics Connect (for every queue), Property Get/Set, Identify, Set/Get
//! Features, Get Log Page (the discovery log on the discovery controller; the ANA log page;
//! empty error, SMART and firmware pages), Asynchronous Event Requests (held until an ANA
//! change of the controller's port is to be reported, if the host enabled ANA change
//! notices), Keep Alive and Abort. Every command but Connect and the property commands needs
//! CSTS.RDY (NVMe Base 2.0 §3.5.1: Command Sequence Error otherwise).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::ctrl::{ADMIN_QUEUE_SIZE, BLOCK, DISCOVERY_NQN};
use super::io::MDTS;
use super::queue::{Conn, End, Queue};
use crate::wire::ana::{self, aen, anacap, cmic, NMIC_SHARED};
use crate::wire::cmd::{feature, Command, DataPtr};
use crate::wire::discovery;
use crate::wire::fabrics::{nqn_str, prop, Connect, ConnectData, CATTR_DISABLE_SQ_FLOW};
use crate::wire::identify::{
    cns, encode_ns_descs, encode_ns_list, nidt, IdCtrl, IdNs, NsDesc, CNTRLTYPE_DISCOVERY,
    CNTRLTYPE_IO, IDENTIFY_LEN,
};
use crate::wire::status::Status;

/// How often an admin queue with nothing to read looks for an event to report (the ANA
/// change notice reaches a host within about this long of the change).
const ADMIN_POLL: Duration = Duration::from_millis(50);

/// Asynchronous Event Request Limit, 0's based.
const AERL: u8 = 3;
/// CAP.TO: 5 s in 500 ms units.
const CAP_TO: u8 = 10;

/// Connect's "invalid parameter" result: the offset of the bad field in the SQE...
fn ipo_sqe(off: u32) -> u64 {
    off as u64
}

/// ...or in the Connect data (IATTR set).
fn ipo_data(off: u32) -> u64 {
    (1 << 16) | off as u64
}

impl Conn {
    pub(super) fn connect(&mut self, cid: u16, c: &Connect, data: &[u8]) -> Result<(), End> {
        if self.q.is_some() {
            return self.resp(cid, Status::CMD_SEQ_ERROR, 0);
        }
        if c.recfmt != 0 {
            return self.resp(cid, Status::CONNECT_FORMAT, 0);
        }
        let Ok(d) = ConnectData::parse(data) else {
            return self.resp(cid, Status::SGL_INVALID_DATA, 0);
        };
        let bad = Status::CONNECT_INVALID_PARAM;
        let Some(sub) = nqn_str(&d.subsysnqn) else {
            return self.resp(cid, bad, ipo_data(256));
        };
        let Some(host) = nqn_str(&d.hostnqn).filter(|h| !h.is_empty()) else {
            return self.resp(cid, bad, ipo_data(512));
        };
        let discovery = sub == DISCOVERY_NQN;
        if !discovery && sub != self.sh.cfg.nqn {
            return self.resp(cid, bad, ipo_data(256));
        }
        if c.qid == 0 {
            if d.cntlid.get() != 0xffff {
                return self.resp(cid, bad, ipo_data(16));
            }
            if c.sqsize == 0 || c.sqsize >= ADMIN_QUEUE_SIZE {
                return self.resp(cid, bad, ipo_sqe(44));
            }
            let Some(ctrl) = self.sh.create_ctrl(host, discovery, c.kato, self.port) else {
                return self.resp(cid, Status::CONNECT_CTRL_BUSY, 0);
            };
            // The admin queue looks for events to report this often when idle.
            let _ = self.set_read_timeout(ADMIN_POLL);
            let id = ctrl.cntlid;
            self.q = Some(Queue {
                qid: 0,
                size: c.sqsize + 1,
                ctrl,
                sqflow_off: c.cattr & CATTR_DISABLE_SQ_FLOW != 0,
            });
            return self.resp(cid, Status::SUCCESS, id as u64);
        }
        if discovery {
            return self.resp(cid, bad, ipo_sqe(42));
        }
        let Some(ctrl) = self
            .sh
            .find_ctrl(d.cntlid.get())
            .filter(|x| x.hostnqn == host && !x.discovery)
        else {
            return self.resp(cid, bad, ipo_data(16));
        };
        if !ctrl.ready() {
            return self.resp(cid, Status::CMD_SEQ_ERROR, 0);
        }
        let granted = ctrl.queues_granted.load(Ordering::Relaxed);
        let max = if granted > 0 {
            granted
        } else {
            self.sh.cfg.max_io_queues
        };
        if c.qid > max {
            return self.resp(cid, bad, ipo_sqe(42));
        }
        if c.sqsize == 0 || c.sqsize >= self.sh.cfg.max_queue_size {
            return self.resp(cid, bad, ipo_sqe(44));
        }
        if !ctrl.claim_queue(c.qid) {
            return self.resp(cid, bad, ipo_sqe(42));
        }
        let id = ctrl.cntlid;
        self.q = Some(Queue {
            qid: c.qid,
            size: c.sqsize + 1,
            ctrl,
            sqflow_off: c.cattr & CATTR_DISABLE_SQ_FLOW != 0,
        });
        self.resp(cid, Status::SUCCESS, id as u64)
    }
}

pub(super) fn handle(c: &mut Conn, cid: u16, cmd: Command, dp: DataPtr) -> Result<(), End> {
    let Some(ctrl) = c.q.as_ref().map(|q| q.ctrl.clone()) else {
        return c.resp(cid, Status::CMD_SEQ_ERROR, 0);
    };
    let cfg = &c.sh.cfg;
    match cmd {
        Command::PropertyGet { eight, offset } => {
            let (v, wide) = match offset {
                prop::CAP => (prop::cap(cfg.max_queue_size, CAP_TO), true),
                prop::VS => (prop::VS_1_3 as u64, false),
                prop::CC => (ctrl.cc.load(Ordering::Relaxed) as u64, false),
                prop::CSTS => (ctrl.csts.load(Ordering::Relaxed) as u64, false),
                _ => return c.resp(cid, Status::INVALID_FIELD, 0),
            };
            if wide != eight {
                return c.resp(cid, Status::INVALID_FIELD, 0);
            }
            return c.resp(cid, Status::SUCCESS, v);
        }
        Command::PropertySet {
            eight,
            offset,
            value,
        } => {
            if offset != prop::CC || eight {
                return c.resp(cid, Status::INVALID_FIELD, 0);
            }
            ctrl.set_cc(value as u32);
            return c.resp(cid, Status::SUCCESS, 0);
        }
        _ => {}
    }
    if !ctrl.ready() {
        return c.resp(cid, Status::CMD_SEQ_ERROR, 0);
    }
    // Any admin command restarts the keep-alive timer (Traffic Based Keep Alive is not
    // advertised, but a host that is talking is alive).
    ctrl.keep_alive();
    let to_host = |c: &mut Conn, data: Vec<u8>| -> Result<(), End> {
        match dp {
            DataPtr::Transport { len } => {
                c.c2h(cid, &data, len);
                c.resp(cid, Status::SUCCESS, 0)
            }
            DataPtr::InCapsule { .. } => c.resp(cid, Status::SGL_INVALID_TYPE, 0),
        }
    };
    match cmd {
        Command::Identify { cns, nsid, csi, .. } => {
            let ns_ok = c.sh.ns_active(nsid) && !ctrl.discovery;
            let data = match cns {
                cns::CONTROLLER => identify_ctrl(c, ctrl.cntlid, ctrl.discovery),
                cns::NAMESPACE if ns_ok => IdNs {
                    nsze: c.sh.blocks,
                    ncap: c.sh.blocks,
                    nuse: c.sh.ns_used_blocks(nsid),
                    nsfeat: 1,
                    lbads: BLOCK.trailing_zeros() as u8,
                    // Deallocated blocks read zeros; Write Zeroes takes DEAC (the store frees
                    // whole chunks it zeroes either way).
                    dlfeat: 0x09,
                    // Shared by every controller of every port: one namespace head on a
                    // multipath host.
                    nmic: NMIC_SHARED,
                    anagrpid: super::ana::GROUP,
                    nguid: c.sh.nguid_of(nsid),
                }
                .encode(),
                cns::ACTIVE_NS_LIST => {
                    let list: Vec<u32> = if ctrl.discovery {
                        Vec::new()
                    } else {
                        (1..=cfg.namespaces).collect()
                    };
                    encode_ns_list(&list, nsid)
                }
                cns::NS_DESC_LIST if ns_ok => encode_ns_descs(&[
                    NsDesc {
                        nidt: nidt::NGUID,
                        nid: c.sh.nguid_of(nsid).to_vec(),
                    },
                    NsDesc {
                        nidt: nidt::CSI,
                        nid: vec![0],
                    },
                ]),
                // I/O command set specific namespace and controller data of the NVM set: no
                // limits to report, all zeros.
                0x05 if ns_ok && csi == 0 => vec![0; IDENTIFY_LEN],
                0x06 if csi == 0 && !ctrl.discovery => vec![0; IDENTIFY_LEN],
                cns::NAMESPACE | cns::NS_DESC_LIST | 0x05 => {
                    return c.resp(cid, Status::INVALID_NS, 0)
                }
                _ => return c.resp(cid, Status::INVALID_FIELD, 0),
            };
            to_host(c, data)
        }
        Command::SetFeatures { fid, cdw11, .. } => match fid {
            feature::NUM_QUEUES => {
                let (nsqr, ncqr) = (cdw11 & 0xffff, cdw11 >> 16);
                if nsqr == 0xffff || ncqr == 0xffff {
                    return c.resp(cid, Status::INVALID_FIELD, 0);
                }
                let max = cfg.max_io_queues as u32;
                let n = (nsqr + 1).min(ncqr + 1).min(max).max(1);
                ctrl.queues_granted.store(n as u16, Ordering::Relaxed);
                c.resp(cid, Status::SUCCESS, ((n - 1) | (n - 1) << 16) as u64)
            }
            feature::KATO => {
                ctrl.kato_ms.store(cdw11, Ordering::Relaxed);
                c.resp(cid, Status::SUCCESS, 0)
            }
            feature::ASYNC_EVENT_CONFIG => {
                ctrl.aec.store(cdw11, Ordering::Relaxed);
                c.resp(cid, Status::SUCCESS, 0)
            }
            feature::VOLATILE_WC => c.resp(cid, Status::SUCCESS, 0),
            _ => c.resp(cid, Status::INVALID_FIELD, 0),
        },
        Command::GetFeatures { fid, .. } => {
            let v = match fid {
                feature::NUM_QUEUES => {
                    let g = ctrl.queues_granted.load(Ordering::Relaxed);
                    let n = if g > 0 { g } else { cfg.max_io_queues } as u32 - 1;
                    n | n << 16
                }
                feature::KATO => ctrl.kato_ms.load(Ordering::Relaxed),
                feature::ASYNC_EVENT_CONFIG => ctrl.aec.load(Ordering::Relaxed),
                feature::VOLATILE_WC => 1,
                _ => return c.resp(cid, Status::INVALID_FIELD, 0),
            };
            c.resp(cid, Status::SUCCESS, v as u64)
        }
        Command::GetLogPage {
            lid,
            lsp,
            rae,
            numd,
            offset,
            ..
        } => {
            let page = match lid {
                discovery::LID if ctrl.discovery => discovery_log(c),
                ana::LID if !ctrl.discovery => {
                    if !rae {
                        // Read: the next change is announced again. Cleared before the page
                        // is built, so a change racing with this read is announced too.
                        ctrl.ana_event.store(false, Ordering::Release);
                        ctrl.ana_masked.store(false, Ordering::Release);
                    }
                    c.sh.ana
                        .log(c.port, cfg.namespaces)
                        .encode(lsp & ana::LSP_RGO != 0)
                }
                0x01..=0x03 => vec![0; 512],
                _ => return c.resp(cid, Status::INVALID_LOG_PAGE, 0),
            };
            let want = (numd * 4).min(dp.len() as u64) as usize;
            let Ok(start) = usize::try_from(offset) else {
                return c.resp(cid, Status::INVALID_FIELD, 0);
            };
            if start % 4 != 0 || start > page.len() {
                return c.resp(cid, Status::INVALID_FIELD, 0);
            }
            // Never more than the page holds: the SGL length is the host's to choose, up to
            // 4 GiB, and a buffer that size would be the host's to allocate.
            let mut out = page[start..].to_vec();
            out.truncate(want);
            to_host(c, out)
        }
        Command::AsyncEvent => {
            if c.aers.len() > AERL as usize {
                return c.resp(cid, Status::ASYNC_LIMIT, 0);
            }
            c.aers.push_back(cid);
            report_events(c);
            Ok(())
        }
        Command::KeepAlive => c.resp(cid, Status::SUCCESS, 0),
        // Nothing waits long enough to abort: "command not aborted" (DW0 bit 0).
        Command::Abort => c.resp(cid, Status::SUCCESS, 1),
        _ => c.resp(cid, Status::INVALID_OPCODE, 0),
    }
}

/// Completes the oldest held Asynchronous Event Request with an ANA change notice when the
/// controller's port changed state, the host enabled the notice (Set Features 0Bh, bit 11)
/// and has read the log page since the last one. Called when the connection has nothing else
/// to do, so within [`ADMIN_POLL`] of a change.
pub(super) fn report_events(c: &mut Conn) {
    let Some(ctrl) = c.q.as_ref().filter(|q| q.qid == 0).map(|q| q.ctrl.clone()) else {
        return;
    };
    if c.aers.is_empty() || !ctrl.ana_event.load(Ordering::Acquire) {
        return;
    }
    if ctrl.aec.load(Ordering::Relaxed) & aen::CFG_ANA_CHANGE == 0 {
        // Not asked for: nothing is reported (the host reads the page when it wants).
        ctrl.ana_event.store(false, Ordering::Release);
        return;
    }
    if ctrl.ana_masked.swap(true, Ordering::AcqRel) {
        return;
    }
    ctrl.ana_event.store(false, Ordering::Release);
    if let Some(cid) = c.aers.pop_front() {
        let _ = c.resp(cid, Status::SUCCESS, aen::ana_change() as u64);
    }
}

fn identify_ctrl(c: &Conn, cntlid: u16, discovery: bool) -> Vec<u8> {
    let cfg = &c.sh.cfg;
    IdCtrl {
        // No PCI vendor: sanbench is recognised by its model number.
        vid: 0,
        sn: format!("{:08x}", crc32c::crc32c(c.sh.nguid.as_slice())),
        mn: "SANBENCH".into(),
        fr: env!("CARGO_PKG_VERSION").into(),
        mdts: MDTS,
        // Several ports and controllers, ANA reporting (as Linux's nvmet): what the kernel's
        // host needs to group the controllers of two ports under one namespace head.
        cmic: if discovery {
            0
        } else {
            cmic::MULTI_PORT | cmic::MULTI_CTRL | cmic::ANA
        },
        cntlid,
        ver: prop::VS_1_3,
        oaes: if discovery { 0 } else { aen::CFG_ANA_CHANGE },
        cntrltype: if discovery {
            CNTRLTYPE_DISCOVERY
        } else {
            CNTRLTYPE_IO
        },
        aerl: AERL,
        kas: 10,
        anatt: if discovery { 0 } else { super::ana::ANATT_SECS },
        anacap: if discovery {
            0
        } else {
            anacap::OPTIMIZED
                | anacap::NON_OPTIMIZED
                | anacap::INACCESSIBLE
                | anacap::PERSISTENT_LOSS
                | anacap::CHANGE
                | anacap::GRPID_FIXED
        },
        anagrpmax: if discovery { 0 } else { super::ana::GROUP },
        nanagrpid: if discovery { 0 } else { 1 },
        maxcmd: cfg.max_queue_size,
        nn: if discovery { 0 } else { cfg.namespaces },
        // Dataset Management and Write Zeroes.
        oncs: if discovery { 0 } else { 1 << 2 | 1 << 3 },
        vwc: if discovery { 0 } else { 1 },
        // SGLs supported (no alignment), in-capsule data offsets (bit 20).
        sgls: 1 | 1 << 20,
        // Linux's host refuses ANA with MNAN 0 or above NN, and sizes its log buffer with it.
        mnan: if discovery { 0 } else { cfg.namespaces },
        subnqn: if discovery {
            DISCOVERY_NQN.into()
        } else {
            cfg.nqn.clone()
        },
        ioccsz: (64 + cfg.in_capsule) / 16,
        iorcsz: 1,
        icdoff: 0,
        msdbd: 1,
    }
    .encode()
}

/// The discovery log page (NVMe-oF 1.1 §5.3): the NVM subsystem at each listening port,
/// numbered from 1 in the order given.
fn discovery_log(c: &Conn) -> Vec<u8> {
    let recs: Vec<_> = (1u16..)
        .zip(&c.sh.ports)
        .map(|(portid, a)| discovery::Record {
            trtype: discovery::TRTYPE_TCP,
            adrfam: if a.is_ipv4() {
                discovery::ADRFAM_IPV4
            } else {
                discovery::ADRFAM_IPV6
            },
            subtype: discovery::SUBTYPE_NVM,
            portid,
            cntlid: 0xffff,
            asqsz: ADMIN_QUEUE_SIZE,
            trsvcid: a.port().to_string(),
            subnqn: c.sh.cfg.nqn.clone(),
            traddr: a.ip().to_string(),
        })
        .collect();
    discovery::encode(1, &recs)
}
