//! The iSCSI target: listens on a loopback (or any) address, one thread per connection,
//! RAM-backed LUNs allocated as written or preallocated (or one file), discovery and normal
//! sessions. Each LUN's bytes live in a [`BlockStore`], the same store as the NBD server's, so
//! the two servers differ only by transport; GET LBA STATUS reports its allocation map.
//!
//! The standard INQUIRY vendor identification is `SANBENCH`: clients rely on it to know the
//! LUN is sanbench's own scratch disk, which they may overwrite.
//!
//! LUN numbering: LUNs are 0..`luns`-1; there is no separate controller LUN, so the
//! compliance URL is `iscsi://HOST:PORT/IQN/0`.

mod conn;
mod inquiry;
mod lun;
mod outcome;
mod pr;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

use thiserror::Error;

use crate::wire::chap::Credentials;
use crate::wire::login::TargetLoginConfig;
use lun::Lun;
use outcome::BLOCK;
pub use sanbench_blockstore::delay::Delay;
use sanbench_blockstore::BlockStore;

/// A connection's thread is named `sb-iscsi-c{N}` (the target's Nth connection): the
/// bottleneck attribution (crates/cli/src/bottleneck.rs) finds the target's threads by this
/// prefix.
pub const CONNECTION_THREAD_PREFIX: &str = "sb-iscsi-c";

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
    #[error("cannot set up LUN {lun}'s store: {source}")]
    Store {
        lun: u32,
        #[source]
        source: sanbench_blockstore::StoreError,
    },
    #[error("accept failed: {0}")]
    Accept(#[source] std::io::Error),
}

/// What to serve.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub listen: SocketAddr,
    /// More portals of the same target (multipath): every portal serves the same LUNs with
    /// the same identity (VPD 0x83), all in portal group 1.
    pub also_listen: Vec<SocketAddr>,
    pub iqn: String,
    /// Number of LUNs (numbered from 0).
    pub luns: u32,
    /// Size of each LUN in bytes (rounded down to 512-byte blocks).
    pub lun_size: u64,
    /// Require CHAP from initiators: the user and secret they must prove.
    pub chap: Option<Credentials>,
    /// The name and secret the target proves itself with to initiators that ask (mutual CHAP).
    pub target_chap: Option<Credentials>,
    /// Back LUN 0 with this file instead of RAM (other LUNs stay in RAM).
    pub file: Option<PathBuf>,
    /// Allocate (and touch) every LUN's RAM at start, or the file's blocks, so that no first
    /// write pays for allocation inside a measurement.
    pub prealloc: bool,
    /// Emulated latency: each SCSI command's status held until this long after the command
    /// (with its data) arrived (see [`sanbench_blockstore::delay`]); None answers at once.
    pub delay: Option<Delay>,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3260)),
            also_listen: Vec::new(),
            iqn: "iqn.2026-11.io.sanbench:ram".into(),
            luns: 1,
            lun_size: 1 << 30,
            chap: None,
            target_chap: None,
            file: None,
            prealloc: false,
            delay: None,
        }
    }
}

pub(crate) struct Shared {
    pub cfg: TargetConfig,
    pub luns: Vec<Lun>,
    pub login: TargetLoginConfig,
    pub next_tsih: AtomicU16,
    /// Every portal as SendTargets lists it (`ip:port,1`): one portal group, several portals.
    pub portals: Vec<String>,
    /// I/O counters (`serve --metrics-listen`), once [`Target::counters`] turned them on.
    pub counters: sanbench_blockstore::counters::Switch,
}

/// What a caller can watch while the target runs (and read after it stopped).
pub struct TargetStats {
    /// Connections accepted (discovery and normal sessions).
    pub connections: AtomicU64,
    shared: Arc<Shared>,
}

impl TargetStats {
    /// Bytes holding data, summed over the LUNs: RAM chunks written and not unmapped (every
    /// chunk with `prealloc`), or the blocks the file system allocated to the file.
    pub fn allocated_bytes(&self) -> u64 {
        self.shared
            .luns
            .iter()
            .map(|l| l.store.allocated_bytes())
            .sum()
    }
}

/// A bound, not yet running target.
pub struct Target {
    /// One per portal, in the order given (`listen` first).
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    stats: Arc<TargetStats>,
}

impl Target {
    pub fn bind(cfg: TargetConfig) -> Result<Target, TargetError> {
        if cfg.luns == 0 || cfg.luns > 16383 {
            return Err(TargetError::Config(format!(
                "luns must be 1..=16383, not {}",
                cfg.luns
            )));
        }
        if cfg.lun_size < BLOCK {
            return Err(TargetError::Config(
                "lun_size must be at least 512 bytes".into(),
            ));
        }
        let mut listeners = Vec::new();
        let mut locals = Vec::new();
        for &addr in std::iter::once(&cfg.listen).chain(&cfg.also_listen) {
            let bind = |source| TargetError::Bind { addr, source };
            let l = TcpListener::bind(addr).map_err(bind)?;
            locals.push(l.local_addr().map_err(bind)?);
            listeners.push(l);
        }
        // One identity for every portal (a multipathing initiator compares it across paths),
        // different for two targets: derived from the name and the first portal as bound, as
        // the NVMe target's NGUID is.
        let identity = crc32c::crc32c(format!("{}:{}", cfg.iqn, locals[0]).as_bytes());
        let mut luns = Vec::new();
        for i in 0..cfg.luns {
            let (backing, size) = match (&cfg.file, i) {
                (Some(p), 0) => {
                    let (f, len) =
                        sanbench_blockstore::open_backing(p, true, true).map_err(|source| {
                            TargetError::File {
                                path: p.clone(),
                                source,
                            }
                        })?;
                    let size = if len >= BLOCK { len } else { cfg.lun_size };
                    let store = BlockStore::file(f, size, cfg.prealloc)
                        .map_err(|source| TargetError::Store { lun: i, source })?;
                    (store, size)
                }
                _ => {
                    let store = BlockStore::ram(cfg.lun_size, cfg.prealloc)
                        .map_err(|source| TargetError::Store { lun: i, source })?;
                    (store, cfg.lun_size)
                }
            };
            luns.push(Lun::new(i as u16, backing, size - size % BLOCK, identity));
        }
        let login = TargetLoginConfig {
            target_names: vec![cfg.iqn.clone()],
            chap: cfg.chap.clone(),
            target_chap: cfg.target_chap.clone(),
            ..TargetLoginConfig::default()
        };
        let shared = Arc::new(Shared {
            portals: locals
                .iter()
                .map(|a| format!("{}:{},1", a.ip(), a.port()))
                .collect(),
            cfg,
            luns,
            login,
            next_tsih: AtomicU16::new(1),
            counters: Default::default(),
        });
        let stats = Arc::new(TargetStats {
            connections: AtomicU64::new(0),
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

    /// Turns on the per-connection and per-LUN I/O counters (`serve --metrics-listen`) for
    /// connections accepted from now on, and returns them; the LUNs are named `lun0`, ....
    pub fn counters(&self) -> Arc<sanbench_blockstore::counters::ServerCounters> {
        let luns = self.shared.luns.len();
        self.shared
            .counters
            .turn_on(|| (0..luns).map(|i| format!("lun{i}")).collect())
    }

    /// The first portal's address (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs()[0]
    }

    /// Every portal's address, `listen` first.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        let given = std::iter::once(&self.shared.cfg.listen).chain(&self.shared.cfg.also_listen);
        sanbench_blockstore::portals::local_addrs(&self.listeners, given)
    }

    /// Serves until `shutdown` becomes true, then waits for connection threads to end.
    pub fn run(self, shutdown: Arc<AtomicBool>) -> Result<(), TargetError> {
        let (shared, stats) = (self.shared.clone(), self.stats.clone());
        let stop = shutdown.clone();
        sanbench_blockstore::portals::accept_loop(&self.listeners, &shutdown, |_port, s| {
            let number = stats.connections.fetch_add(1, Ordering::Relaxed);
            let (sh, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                if let Ok(n) = std::ffi::CString::new(format!("{CONNECTION_THREAD_PREFIX}{number}"))
                {
                    let _ = rustix::thread::set_name(&n);
                }
                conn::serve(s, sh, stop, number)
            })
        })
        .map_err(TargetError::Accept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI and tests may print a target's configuration with {:?}: no secret in it.
    #[test]
    fn debug_of_the_config_hides_the_secrets() {
        let cfg = TargetConfig {
            chap: Some(Credentials::new("bench", "initiator-secret-7")),
            target_chap: Some(Credentials::new("tgt", "target-secret-8")),
            ..TargetConfig::default()
        };
        let d = format!("{cfg:?}");
        assert!(d.contains("bench") && d.contains("tgt"), "{d}");
        assert!(
            !d.contains("initiator-secret-7") && !d.contains("target-secret-8"),
            "{d}"
        );
    }
}
