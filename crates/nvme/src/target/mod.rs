//! The NVMe/TCP target: a discovery controller and one NVM subsystem with one namespace (NSID 1)
//! over a [`BlockStore`] (the same store as the NBD and iSCSI servers), several I/O queues per
//! controller, header and data digests, keep-alive. One thread per connection (an admin or an
//! I/O queue); a connection's protocol error ends only that connection (after a C2HTermReq),
//! and a controller's queues end with its admin queue or its keep-alive timer.
//!
//! Controllers are dynamic (NVMe-oF 1.1 §3.3): the admin queue's Connect creates one and
//! returns its id, which the same host names in each I/O queue's Connect.
//!
//! Several ports (`also_listen`) serve one subsystem: the namespaces are shared (NMIC),
//! controller ids unique across ports, and each port has its own ANA state of the one ANA
//! group ([`ana`]), changeable while the target runs ([`AnaControl`], [`control`]): what
//! Linux's native NVMe multipath needs to put the controllers of two ports under one
//! namespace head and choose between them.

mod admin;
pub mod ana;
mod conn;
pub mod control;
mod ctrl;
mod io;
mod queue;

use sanbench_io::poison;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wire::ana::AnaState;

pub use sanbench_blockstore::delay::Delay;
use sanbench_blockstore::BlockStore;
use thiserror::Error;

pub use ana::{AnaSetting, PortRef};
pub use control::{ControlServer, PortState};
pub use ctrl::DISCOVERY_NQN;

/// A connection's thread is named `sb-nvme-c{N}` (the target's Nth connection): the
/// bottleneck attribution (crates/cli/src/bottleneck.rs) finds the target's threads by this
/// prefix.
pub const CONNECTION_THREAD_PREFIX: &str = "sb-nvme-c";

/// Errors of starting or running the target.
#[derive(Debug, Error)]
pub enum TargetError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open backing file {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot set up the namespace's store: {0}")]
    Store(#[source] sanbench_blockstore::StoreError),
    #[error("accept failed: {0}")]
    Accept(#[source] std::io::Error),
}

/// What to serve.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub listen: SocketAddr,
    /// More ports of the same subsystem (multipath): each serves the same namespaces with the
    /// same NGUIDs; the discovery log lists them all, `listen` as port 1.
    pub also_listen: Vec<SocketAddr>,
    /// The NVM subsystem's NQN.
    pub nqn: String,
    /// Size of each namespace in bytes (rounded down to 512-byte blocks).
    pub size: u64,
    /// Namespaces 1..=N, each `size` bytes, side by side in one store.
    pub namespaces: u32,
    /// Back the namespace with this file instead of RAM.
    pub file: Option<PathBuf>,
    /// Allocate (and touch) all RAM, or the file's blocks, at start.
    pub prealloc: bool,
    /// I/O queues per controller.
    pub max_io_queues: u16,
    /// Entries per I/O queue (CAP.MQES + 1).
    pub max_queue_size: u16,
    /// In-capsule data an I/O command may carry (IOCCSZ is this plus the 64-byte SQE).
    pub in_capsule: u32,
    /// MAXH2CDATA: the largest H2CData PDU accepted.
    pub max_h2c_data: u32,
    /// A host that takes nothing of a reply for this long is cut off (one that stopped
    /// reading must not hold its connection's thread forever).
    pub send_timeout: Duration,
    /// Emulated latency: each I/O command's completion held until this long after the
    /// command (with its data) arrived (see [`sanbench_blockstore::delay`]); None answers at
    /// once.
    pub delay: Option<Delay>,
    /// ANA states of ports at start (every other port: optimized).
    pub ana: Vec<AnaSetting>,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 4420)),
            also_listen: Vec::new(),
            nqn: "nqn.2026-11.io.sanbench:ram".into(),
            size: 1 << 30,
            namespaces: 1,
            file: None,
            prealloc: false,
            max_io_queues: 64,
            max_queue_size: 1024,
            in_capsule: 8192,
            max_h2c_data: 128 * 1024,
            send_timeout: Duration::from_secs(10),
            delay: None,
            ana: Vec::new(),
        }
    }
}

/// What a caller can watch while the target runs.
pub struct TargetStats {
    pub connections: AtomicU64,
    /// Connections ended by a protocol error or a dead peer.
    pub failed: AtomicU64,
    /// Why the last failed connection ended.
    pub last_error: Mutex<Option<String>>,
    shared: Arc<ctrl::Shared>,
}

impl TargetStats {
    pub fn allocated_bytes(&self) -> u64 {
        self.shared.store.allocated_bytes()
    }
}

/// A bound, not yet running target.
pub struct Target {
    /// One per port, `listen` first.
    listeners: Vec<TcpListener>,
    shared: Arc<ctrl::Shared>,
    stats: Arc<TargetStats>,
}

/// The most namespaces one subsystem serves (an active namespace list holds 1024).
pub const MAX_NAMESPACES: u32 = 1024;

fn too_big() -> TargetError {
    TargetError::Config("namespace size times namespaces overflows".into())
}

impl Target {
    pub fn bind(cfg: TargetConfig) -> Result<Target, TargetError> {
        if cfg.nqn.is_empty() || cfg.nqn.len() > 223 || cfg.nqn == DISCOVERY_NQN {
            return Err(TargetError::Config(format!(
                "NQN '{}' must be 1-223 bytes and not the discovery NQN",
                cfg.nqn
            )));
        }
        if cfg.max_io_queues == 0 || cfg.max_queue_size < 2 || !cfg.in_capsule.is_multiple_of(16) {
            return Err(TargetError::Config(
                "need at least one I/O queue of 2 entries; in-capsule size a multiple of 16".into(),
            ));
        }
        if cfg.namespaces == 0 || cfg.namespaces > MAX_NAMESPACES {
            return Err(TargetError::Config(format!(
                "{} namespaces: serve 1 to {MAX_NAMESPACES}",
                cfg.namespaces
            )));
        }
        let n = cfg.namespaces as u64;
        let ns_size = |bytes: u64| bytes / n / ctrl::BLOCK * ctrl::BLOCK;
        let store = match &cfg.file {
            Some(p) => {
                let (f, len) =
                    sanbench_blockstore::open_backing(p, true, true).map_err(|source| {
                        TargetError::File {
                            path: p.clone(),
                            source,
                        }
                    })?;
                let size = if cfg.size >= 512 {
                    ns_size(cfg.size.checked_mul(n).ok_or_else(too_big)?) * n
                } else {
                    ns_size(len) * n
                };
                BlockStore::file(f, size, cfg.prealloc).map_err(TargetError::Store)?
            }
            None => BlockStore::ram(
                cfg.size.checked_mul(n).ok_or_else(too_big)? / ctrl::BLOCK * ctrl::BLOCK,
                cfg.prealloc,
            )
            .map_err(TargetError::Store)?,
        };
        if store.size() / n < 512 {
            return Err(TargetError::Config(
                "each namespace needs at least 512 bytes".into(),
            ));
        }
        let mut listeners = Vec::new();
        let mut ports = Vec::new();
        for &addr in std::iter::once(&cfg.listen).chain(&cfg.also_listen) {
            let bind = |source| TargetError::Bind { addr, source };
            let l = TcpListener::bind(addr).map_err(bind)?;
            ports.push(l.local_addr().map_err(bind)?);
            listeners.push(l);
        }
        let given: Vec<SocketAddr> = std::iter::once(cfg.listen)
            .chain(cfg.also_listen.iter().copied())
            .collect();
        let mut states = vec![AnaState::Optimized; ports.len()];
        for a in &cfg.ana {
            let p = a
                .port
                .resolve(&ports, &given)
                .map_err(|e| TargetError::Config(format!("--ana {}={}: {e}", a.port, a.state)))?;
            states[p] = a.state;
        }
        let shared = Arc::new(ctrl::Shared::new(cfg, store, ports, &states));
        let stats = Arc::new(TargetStats {
            connections: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_error: Mutex::new(None),
            shared: shared.clone(),
        });
        Ok(Target {
            listeners,
            shared,
            stats,
        })
    }

    pub fn stats(&self) -> Arc<TargetStats> {
        self.stats.clone()
    }

    /// Turns on the per-connection and per-namespace I/O counters (`serve --metrics-listen`)
    /// for connections accepted from now on, and returns them; the namespaces are named
    /// `ns1`, ....
    pub fn counters(&self) -> Arc<sanbench_blockstore::counters::ServerCounters> {
        let namespaces = self.shared.cfg.namespaces;
        self.shared
            .counters
            .turn_on(|| (1..=namespaces).map(|i| format!("ns{i}")).collect())
    }

    /// The first port's address (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Every port's address, `listen` first.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.shared.ports.clone()
    }

    /// Size of each namespace in bytes.
    pub fn size(&self) -> u64 {
        self.shared.blocks * ctrl::BLOCK
    }

    /// Number of namespaces (NSIDs 1..=N).
    pub fn namespaces(&self) -> u32 {
        self.shared.cfg.namespaces
    }

    /// The handle that reads and changes the ports' ANA states while the target runs.
    pub fn ana_control(&self) -> AnaControl {
        AnaControl {
            shared: self.shared.clone(),
        }
    }

    /// Serves until `shutdown` becomes true, then waits for connection threads to end.
    pub fn run(self, shutdown: Arc<AtomicBool>) -> Result<(), TargetError> {
        let (shared, stats) = (self.shared.clone(), self.stats.clone());
        let stop = shutdown.clone();
        sanbench_blockstore::portals::accept_loop(&self.listeners, &shutdown, |port, s| {
            let number = stats.connections.fetch_add(1, Ordering::Relaxed);
            let (sh, stop, stats) = (shared.clone(), stop.clone(), stats.clone());
            std::thread::spawn(move || {
                if let Ok(n) = std::ffi::CString::new(format!("{CONNECTION_THREAD_PREFIX}{number}"))
                {
                    let _ = rustix::thread::set_name(&n);
                }
                if let Err(e) = conn::serve(s, sh, stop, number, port) {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    *poison::lock(&stats.last_error) = Some(e.to_string());
                }
            })
        })
        .map_err(TargetError::Accept)
    }
}

/// Reads and sets the ports' ANA states of a running target (the control socket and tests
/// use it). A change reaches hosts at once for new I/O (commands through a port whose state
/// does not serve I/O fail with a path-related status) and as an ANA change notice on each
/// of the port's controllers that asked for one.
#[derive(Clone)]
pub struct AnaControl {
    shared: Arc<ctrl::Shared>,
}

impl AnaControl {
    /// Every port's state, in `--listen` order.
    pub fn states(&self) -> Vec<PortState> {
        (0..self.shared.ports.len())
            .map(|i| PortState {
                index: i + 1,
                addr: self.shared.ports[i],
                state: self.shared.ana.get(i),
            })
            .collect()
    }

    /// Applies every setting, or none when one names an unknown port.
    pub fn set(&self, settings: &[AnaSetting]) -> Result<(), String> {
        let sh = &self.shared;
        let given: Vec<SocketAddr> = std::iter::once(sh.cfg.listen)
            .chain(sh.cfg.also_listen.iter().copied())
            .collect();
        let resolved = settings
            .iter()
            .map(|a| a.port.resolve(&sh.ports, &given).map(|p| (p, a.state)))
            .collect::<Result<Vec<_>, _>>()?;
        for (p, st) in resolved {
            sh.set_ana(p, st);
        }
        Ok(())
    }
}
