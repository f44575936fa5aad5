//! The `nvme+tcp://HOST[:PORT]/SUBSYSNQN[/NSID]` engine (port 4420, namespace 1): the admin
//! queue connects and enables the controller when the target opens, and keeps it alive from a
//! thread of its own (Keep Alive every KATO/3); each worker's queue is an I/O queue of its own
//! connection ([`queue`]). Query keys: `digest=header,data` (either or both; a digest asked
//! for is required), `hostnqn=NQN`, `kato=MS`, `sockio=uring|poll` (the I/O queues' sockets
//! on io_uring or the poll loop; default [`SocketLayer::from_env`]; the admin queue always
//! polls).
//!
//! A controller that reports ANA (CMIC bit 3) has its namespace's state read at open and kept
//! current ([`admin`]): the target's `access_state`, which a multipath target routes by; an
//! I/O that comes back with a path-related status completes with
//! [`PATH_ERROR`](sanbench_io::PATH_ERROR).

mod admin;
mod discover;
mod queue;

pub use discover::discover;

use sanbench_io::poison;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sanbench_io::{
    AccessState, Allocation, EngineError, Queue, QueueConfig, SocketLayer, Target, TargetInfo,
};
use serde_json::json;

use admin::{Ana, Qid, Qids};

use crate::host::conn::HostOptions;
use crate::host::session::{connect_admin, connect_io, AdminSession};
use crate::host::HostError;
use crate::target::DISCOVERY_NQN;

pub const DEFAULT_PORT: u16 = 4420;
/// The discovery service's IANA port.
pub const DISCOVERY_PORT: u16 = 8009;

/// A parsed `nvme+tcp://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmeUri {
    pub host: String,
    pub port: u16,
    pub subnqn: String,
    pub nsid: u32,
    pub header_digest: bool,
    pub data_digest: bool,
    pub hostnqn: Option<String>,
    pub kato_ms: u32,
    /// The I/O queues' socket layer asked for.
    pub socket: SocketLayer,
}

impl NvmeUri {
    pub fn parse(uri: &str) -> Result<NvmeUri, EngineError> {
        Self::parse_as(uri, false)
    }

    /// A discovery controller's URI, `nvme+tcp://HOST[:PORT][/DISCOVERY-NQN]`: port 8009 and
    /// the well-known discovery NQN unless given.
    pub fn parse_discovery(uri: &str) -> Result<NvmeUri, EngineError> {
        Self::parse_as(uri, true)
    }

    fn parse_as(uri: &str, discovery: bool) -> Result<NvmeUri, EngineError> {
        let bad = |why: String| EngineError::Invalid(format!("{uri}: {why}"));
        let rest = uri
            .strip_prefix("nvme+tcp://")
            .ok_or_else(|| bad("not an nvme+tcp:// URI".into()))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in the address".into()))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (hostport.to_string(), ""),
            }
        };
        if host.is_empty() {
            return Err(bad("no host".into()));
        }
        let port = if port.is_empty() {
            if discovery {
                DISCOVERY_PORT
            } else {
                DEFAULT_PORT
            }
        } else {
            port.parse()
                .map_err(|_| bad(format!("port '{port}' is not a number")))?
        };
        let mut parts = path.split('/').filter(|s| !s.is_empty());
        let mut subnqn = parts.next().unwrap_or("").to_string();
        if discovery {
            if subnqn.is_empty() {
                subnqn = DISCOVERY_NQN.into();
            }
            if subnqn != DISCOVERY_NQN || parts.next().is_some() {
                return Err(bad(format!(
                    "discover takes nvme+tcp://HOST[:PORT] (the discovery controller, {DISCOVERY_NQN})"
                )));
            }
        } else if subnqn.is_empty() || subnqn == DISCOVERY_NQN {
            return Err(bad(
                "name the NVM subsystem: nvme+tcp://HOST[:PORT]/SUBSYSNQN[/NSID]".into(),
            ));
        }
        let nsid = match parts.next() {
            Some(n) => n
                .parse()
                .ok()
                .filter(|&n: &u32| n != 0 && n != u32::MAX)
                .ok_or_else(|| bad(format!("namespace id '{n}' is not 1..0xfffffffe")))?,
            None => 1,
        };
        if parts.next().is_some() {
            return Err(bad("too many path parts after the NSID".into()));
        }
        let mut u = NvmeUri {
            host,
            port,
            subnqn,
            nsid,
            header_digest: false,
            data_digest: false,
            hostnqn: None,
            kato_ms: 15_000,
            socket: SocketLayer::from_env(),
        };
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "digest" => {
                    for d in v.split(',').filter(|s| !s.is_empty()) {
                        match d {
                            "header" => u.header_digest = true,
                            "data" => u.data_digest = true,
                            "none" => {}
                            _ => {
                                return Err(bad(format!("digest '{d}' (use header, data or both)")))
                            }
                        }
                    }
                }
                "hostnqn" if !v.is_empty() => u.hostnqn = Some(v.to_string()),
                "kato" => {
                    u.kato_ms = v
                        .parse()
                        .map_err(|_| bad(format!("kato '{v}' is not milliseconds")))?
                }
                "sockio" => {
                    u.socket = SocketLayer::parse(v)
                        .ok_or_else(|| bad(format!("sockio '{v}' (use uring or poll)")))?
                }
                _ => {
                    return Err(bad(format!(
                        "unknown option '{k}' (digest, hostnqn, kato, sockio)"
                    )))
                }
            }
        }
        Ok(u)
    }
}

pub(crate) fn engine_err(peer: &str, e: HostError, timeout: Duration) -> EngineError {
    match e {
        HostError::Timeout(_) => EngineError::Timeout {
            peer: peer.to_string(),
            secs: timeout.as_secs_f64(),
        },
        HostError::Closed | HostError::Io(_) | HostError::Terminated { .. } => {
            EngineError::Disconnected {
                peer: peer.to_string(),
                reason: e.to_string(),
            }
        }
        other => EngineError::Protocol {
            peer: peer.to_string(),
            reason: other.to_string(),
        },
    }
}

struct NvmeTarget {
    addr: SocketAddr,
    uri: NvmeUri,
    opts: HostOptions,
    info: TargetInfo,
    /// Identify Controller's optional NVM commands (ONCS).
    oncs: u16,
    /// Write Zeroes sets DEAC (DLFEAT: supported, and deallocated blocks read zeros).
    deac: bool,
    admin: Arc<Mutex<AdminSession>>,
    qids: Arc<Mutex<Qids>>,
    /// The namespace's ANA state through this controller, when it reports one.
    ana: Option<Arc<Ana>>,
    stop: Arc<AtomicBool>,
    keeper: Option<JoinHandle<()>>,
    /// The I/O queues' socket layer, chosen at open.
    socket: SocketLayer,
}

/// Opens the target: connects and enables the controller, identifies the namespace. Asks for
/// up to 64 I/O queues (one per worker, as many as the controller grants).
pub fn open(uri: &str) -> Result<Box<dyn Target>, EngineError> {
    let u = NvmeUri::parse(uri)?;
    let (addr, opts) = resolve(&u)?;
    let peer = addr.to_string();
    let mut a = connect_admin(addr, &u.subnqn, u.nsid, 64, &opts)
        .map_err(|e| connect_err(&peer, e, &opts))?;
    // ANA: the state now, and the notices of its changes when the controller sends them.
    let ana = if a.reports_ana() {
        let ana = Arc::new(Ana::default());
        let notices = ana
            .read(&mut a)
            .and_then(|_| a.enable_ana_events())
            .map_err(|e| engine_err(&peer, e, opts.timeout))?;
        ana.notices_on.store(notices, Ordering::Relaxed);
        Some(ana)
    } else {
        None
    };
    let Some(ns) = a.ns.clone() else {
        return Err(EngineError::Invalid(format!(
            "{uri}: a discovery controller"
        )));
    };
    let bs = ns.block_size();
    let mut params = BTreeMap::new();
    params.insert("transport".into(), json!("tcp"));
    params.insert("subnqn".into(), json!(u.subnqn));
    params.insert("nsid".into(), json!(u.nsid));
    params.insert("cntlid".into(), json!(a.cntlid));
    params.insert("model".into(), json!(a.id.mn));
    params.insert("serial".into(), json!(a.id.sn));
    params.insert("firmware".into(), json!(a.id.fr));
    params.insert("header_digest".into(), json!(u.header_digest));
    params.insert("data_digest".into(), json!(u.data_digest));
    params.insert("maxh2cdata".into(), json!(a.conn.maxh2cdata));
    params.insert(
        "in_capsule_bytes".into(),
        json!((a.id.ioccsz as u64 * 16).saturating_sub(64)),
    );
    params.insert("io_queues_granted".into(), json!(a.queues));
    params.insert(
        "max_queue_entries".into(),
        json!(crate::wire::fabrics::prop::cap_mqes(a.cap)),
    );
    params.insert("maxcmd".into(), json!(a.id.maxcmd));
    params.insert("kato_ms".into(), json!(u.kato_ms));
    let (socket, fallback) = u.socket.choose();
    params.insert("socket".into(), json!(socket.name()));
    for (k, v) in sanbench_io::RingFeatures::info_params(socket) {
        params.insert(k.into(), json!(v));
    }
    if let Some(f) = fallback {
        params.insert("socket_fallback".into(), json!(format!("uring asked: {f}")));
    }
    // DLFEAT (Identify Namespace byte 33): bits 2:0 = 1, a deallocated block reads zeros;
    // bit 3, Write Zeroes takes DEAC (deallocate the zeroed blocks).
    params.insert("dlfeat".into(), json!(ns.dlfeat));
    params.insert(
        sanbench_io::params::TRIM_READS_ZEROS.into(),
        json!(ns.dlfeat & 7 == 1),
    );
    let deac = ns.dlfeat & 0x08 != 0 && ns.dlfeat & 7 == 1;
    params.insert("write_zeroes_deac".into(), json!(deac));
    if let Some(st) = ana.as_ref().and_then(|x| x.get()) {
        params.insert("ana_state".into(), json!(st.name()));
        params.insert("ana_group".into(), json!(ns.anagrpid));
        params.insert(
            "ana_notices".into(),
            json!(ana
                .as_ref()
                .is_some_and(|x| x.notices_on.load(Ordering::Relaxed))),
        );
    }
    // The namespace's name, which a multipath target compares across its paths: the
    // subsystem (NQNs are unique), the NSID and the NGUID when the controller reports one.
    let nguid: String = ns.nguid.iter().map(|b| format!("{b:02x}")).collect();
    params.insert(
        sanbench_io::params::LU_ID.into(),
        json!(if ns.nguid == [0; 16] {
            format!("{} nsid {}", u.subnqn, u.nsid)
        } else {
            format!("{} nsid {} nguid {nguid}", u.subnqn, u.nsid)
        }),
    );
    let max_transfer = (a.id.mdts != 0)
        .then(|| 4096u64.checked_shl(a.id.mdts as u32))
        .flatten()
        .map(|m| m.min(u32::MAX as u64) as u32);
    if let Some(m) = max_transfer {
        params.insert("mdts_bytes".into(), json!(m));
    }
    let info = TargetInfo {
        uri: uri.to_string(),
        engine: "nvme".into(),
        size: ns.nsze * bs,
        block_size: bs as u32,
        max_transfer,
        read_only: false,
        params,
    };
    let qids = Qids::new(a.queues);
    let oncs = a.id.oncs;
    let admin = Arc::new(Mutex::new(a));
    let stop = Arc::new(AtomicBool::new(false));
    let keeper = admin::spawn(admin.clone(), stop.clone(), u.kato_ms, ana.clone());
    Ok(Box::new(NvmeTarget {
        addr,
        uri: u,
        opts,
        info,
        oncs,
        deac,
        admin,
        qids,
        ana,
        stop,
        keeper,
        socket,
    }))
}

/// A connection failure as the engine reports it: a refused or unreachable address is
/// `Connect`, anything later is what [`engine_err`] says.
fn connect_err(peer: &str, e: HostError, opts: &HostOptions) -> EngineError {
    match e {
        HostError::Io(e) => EngineError::Connect {
            addr: peer.to_string(),
            reason: e.to_string(),
        },
        e => engine_err(peer, e, opts.timeout),
    }
}

/// The URI's socket address and the host options it asks for.
fn resolve(u: &NvmeUri) -> Result<(SocketAddr, HostOptions), EngineError> {
    let addr = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(|e| EngineError::Connect {
            addr: format!("{}:{}", u.host, u.port),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| EngineError::Connect {
            addr: format!("{}:{}", u.host, u.port),
            reason: "no address".into(),
        })?;
    let mut opts = HostOptions {
        header_digest: u.header_digest,
        data_digest: u.data_digest,
        timeout: Duration::from_secs(10),
        kato_ms: u.kato_ms,
        ..HostOptions::default()
    };
    if let Some(h) = &u.hostnqn {
        opts.hostnqn = h.clone();
    }
    Ok((addr, opts))
}

impl Target for NvmeTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    /// What Identify Controller's ONCS offers: Dataset Management (bit 2) for trims, Write
    /// Zeroes (bit 3).
    fn supports(&self, op: sanbench_io::Op) -> bool {
        match op {
            sanbench_io::Op::Trim => self.oncs & (1 << 2) != 0,
            sanbench_io::Op::WriteZeroes => self.oncs & (1 << 3) != 0,
            _ => true,
        }
    }

    /// From Identify Namespace: on a thin-provisioned namespace (NSFEAT bit 0) NUSE counts
    /// the blocks that hold data, so NUSE = NSZE means every range is written, and for the
    /// whole namespace NSZE - NUSE blocks are not. A part of a namespace that is not all
    /// written cannot be told apart (`None`), nor anything on a namespace without thin
    /// provisioning (Linux's nvmet reports NUSE = NSZE whatever was written).
    fn allocation(&self, offset: u64, len: u64) -> Result<Option<Allocation>, EngineError> {
        let ns = {
            let mut a = poison::lock(&self.admin);
            a.identify_namespace()
                .map_err(|e| engine_err(&self.addr.to_string(), e, self.opts.timeout))?
        };
        if ns.nsfeat & 1 == 0 {
            return Ok(None);
        }
        let bs = ns.block_size();
        let unwritten = ns.nsze.saturating_sub(ns.nuse) * bs;
        let whole = offset == 0 && len >= ns.nsze * bs;
        if unwritten != 0 && !whole {
            return Ok(None);
        }
        Ok(Some(Allocation {
            method: "Identify Namespace (NUSE)".into(),
            checked_bytes: len.min(ns.nsze * bs - offset.min(ns.nsze * bs)),
            unwritten_bytes: unwritten,
        }))
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        let (qid, conn) = {
            let a = poison::lock(&self.admin);
            let Some(qid) = Qid::take(&self.qids) else {
                return Err(EngineError::Invalid(format!(
                    "{}: the controller granted {} I/O queues, fewer than the workers",
                    self.info.uri, a.queues
                )));
            };
            let mut o = self.opts.clone();
            o.timeout = cfg.io_timeout;
            let entries = (cfg.depth + 1).min(u16::MAX as u32) as u16;
            let c = connect_io(self.addr, &self.uri.subnqn, &a, qid.qid, entries, &o)
                .map_err(|e| engine_err(&self.addr.to_string(), e, o.timeout))?;
            (qid, c)
        };
        let mut conn = conn;
        // The probe at open said the kernel has what the ring needs; a ring that still fails
        // to open leaves this queue on the poll loop, which its stats say.
        let fallback = match self.socket {
            SocketLayer::Uring => conn.use_ring_on(cfg.socket_ring.as_ref()).err(),
            SocketLayer::Poll => None,
        };
        Ok(Box::new(queue::NvmeQueue::new(
            conn,
            fallback,
            cfg,
            queue::Path {
                nsid: self.uri.nsid,
                block: self.info.block_size,
                peer: self.addr.to_string(),
                ana: self.ana.clone(),
                qid,
                deac: self.deac,
                zeroes_blocks: queue::max_zeroes_blocks(
                    self.info.max_transfer,
                    self.info.block_size,
                ),
            },
        )))
    }

    fn access_state(&self) -> Option<AccessState> {
        self.ana.as_ref().and_then(|a| a.get()).map(admin::access)
    }

    /// Reads the ANA log page now (on the caller's thread, through the admin queue).
    fn refresh_access_state(&self) -> Result<Option<AccessState>, EngineError> {
        let Some(ana) = &self.ana else {
            return Ok(None);
        };
        let mut a = poison::lock(&self.admin);
        let s = ana
            .read(&mut a)
            .map_err(|e| engine_err(&self.addr.to_string(), e, self.opts.timeout))?;
        Ok(s.map(admin::access))
    }
}

impl Drop for NvmeTarget {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let u = NvmeUri::parse("nvme+tcp://10.0.0.1/nqn.a:b").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.subnqn.as_str(), u.nsid),
            ("10.0.0.1", 4420, "nqn.a:b", 1)
        );
        let u = NvmeUri::parse("nvme+tcp://[::1]:4421/nqn.x/3?digest=header,data&kato=0").unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.nsid,
                u.header_digest,
                u.data_digest,
                u.kato_ms
            ),
            ("::1", 4421, 3, true, true, 0)
        );
        for bad in [
            "nvme+tcp://h",
            "nvme+tcp://h:x/nqn",
            "nvme+tcp://h/nqn/0",
            "nvme+tcp://h/nqn/1/2",
            "nvme+tcp://h/nqn?digest=crc",
            "nvme+tcp://h/nqn?foo=1",
            "nbd://h/x",
        ] {
            assert!(NvmeUri::parse(bad).is_err(), "{bad}");
        }
    }
}
