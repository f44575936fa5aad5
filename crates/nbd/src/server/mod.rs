//! An NBD server: one export, RAM-backed (sparse, allocated as written, or preallocated) or
//! file-backed, a thread per connection. The bytes live in a
//! [`BlockStore`](sanbench_blockstore::BlockStore), the same store as the iSCSI target's, so
//! the two servers differ only by transport.
//!
//! The export description says "sanbench" ("sanbench RAM disk", "sanbench file"): clients
//! rely on it to know the export is sanbench's own scratch disk, which they may overwrite.
//!
//! ```no_run
//! # use std::sync::{Arc, atomic::AtomicBool};
//! use sanbench_nbd::{Server, ServerConfig};
//! let cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 1 << 30);
//! let server = Server::bind(cfg).unwrap();
//! println!("nbd://{}", server.local_addr());
//! server.run(Arc::new(AtomicBool::new(false))).unwrap();
//! ```
//!
//! Advertised: fixed newstyle, `NO_ZEROES`, `NBD_OPT_INFO`/`GO` (export, name, description and
//! block size info), `NBD_OPT_LIST`, structured replies, and the transmission flags
//! `SEND_FLUSH`, `SEND_FUA`, `SEND_TRIM`, `SEND_WRITE_ZEROES`, `SEND_FAST_ZERO` (a file store
//! without fallocate's modes refuses a FAST_ZERO with ENOTSUP), `CAN_MULTI_CONN` (all
//! connections share one store with no cache), `SEND_DF` with structured replies (a READ is
//! always answered in one chunk), and the `base:allocation` metadata context
//! (`NBD_OPT_LIST/SET_META_CONTEXT`, `NBD_CMD_BLOCK_STATUS`: written chunks are data, the rest
//! `NBD_STATE_HOLE | NBD_STATE_ZERO`).
//!
//! TLS (`ServerConfig::tls`): `NBD_OPT_STARTTLS` upgrades a connection during the handshake
//! (see `conn/handshake.rs` and [`crate::tls`]); with `TlsMode::Require`, nothing but
//! STARTTLS and ABORT is served before it.

mod coalesce;
mod conn;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};

use sanbench_blockstore::counters::ServerCounters;
pub use sanbench_blockstore::delay::Delay;
use sanbench_blockstore::BlockStore;
pub use sanbench_blockstore::CHUNK;

use crate::error::NbdError;
use crate::tls::{Acceptor, TlsError};
pub use crate::tls::{Credentials, KtlsMode, TlsMode};
use crate::wire::MAX_PAYLOAD;
use conn::{Conn, End};

/// A connection's thread is named `sb-nbd-c{N}` (the server's Nth connection): the bottleneck
/// attribution (crates/cli/src/bottleneck.rs) finds the server's threads by this prefix.
pub const CONNECTION_THREAD_PREFIX: &str = "sb-nbd-c";

/// Default for [`ServerConfig::coalesce`].
pub const DEFAULT_COALESCE: Duration = Duration::from_micros(200);

/// How often blocked threads look at the shutdown flag.
const POLL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// More addresses serving the same export (multipath: the export advertises
    /// CAN_MULTI_CONN, so a client may spread its requests over connections to any of them).
    pub also_listen: Vec<SocketAddr>,
    /// Export size in bytes; with `file`, 0 means the file's size (a larger size extends it).
    pub size: u64,
    /// Export name; clients asking for "" get this export too.
    pub export: String,
    pub description: String,
    pub read_only: bool,
    /// Back the export with this file (pread/pwrite) instead of RAM.
    pub file: Option<PathBuf>,
    /// Allocate (and touch) the whole RAM export at start, or the whole file's blocks, so
    /// that no first write pays for allocation inside a measurement.
    pub prealloc: bool,
    /// Advertised minimum block size: requests not aligned to it get `NBD_EINVAL`.
    pub min_block: u32,
    pub preferred_block: u32,
    /// Largest READ/WRITE accepted; a longer WRITE disconnects the client.
    pub max_payload: u32,
    /// Wake-up coalescing for pipelining clients: the longest a connection waits for a batch
    /// of requests to gather (see `coalesce.rs`); None wakes for every request.
    pub coalesce: Option<Duration>,
    /// Emulated latency: each reply held until this long after its request arrived (see
    /// [`sanbench_blockstore::delay`]); None answers at once. Turns coalescing off: the wait
    /// for the next due reply takes its place.
    pub delay: Option<Delay>,
    /// `NBD_OPT_STARTTLS`: off, offered, or required.
    pub tls: TlsMode,
    /// The TLS credentials (needed unless `tls` is off).
    pub tls_credentials: Option<Credentials>,
    /// Require a client certificate signed by the certificate directory's `ca-cert.pem` and
    /// not revoked by its `ca-crl.pem` if any (nbdkit's `--tls-verify-peer`; X.509 only). A
    /// client without one fails its TLS handshake and is logged; the server goes on serving
    /// others.
    pub tls_verify_peer: bool,
    /// After the handshake, whether the kernel may make the connection's TLS records
    /// (`--ktls`; see [`crate::tls`]'s kernel module).
    pub ktls: KtlsMode,
}

impl ServerConfig {
    /// A RAM export of `size` bytes named "" with default block sizes.
    pub fn ram(listen: SocketAddr, size: u64) -> ServerConfig {
        ServerConfig {
            listen,
            also_listen: Vec::new(),
            size,
            export: String::new(),
            description: "sanbench RAM disk".into(),
            read_only: false,
            file: None,
            prealloc: false,
            min_block: 1,
            preferred_block: 4096,
            max_payload: MAX_PAYLOAD,
            coalesce: Some(DEFAULT_COALESCE),
            delay: None,
            tls: TlsMode::Off,
            tls_credentials: None,
            tls_verify_peer: false,
            ktls: KtlsMode::Auto,
        }
    }

    /// An export of `path` (0 `size`: the file's size) described as "sanbench file".
    pub fn file(listen: SocketAddr, path: PathBuf, size: u64) -> ServerConfig {
        ServerConfig {
            description: "sanbench file".into(),
            file: Some(path),
            ..ServerConfig::ram(listen, size)
        }
    }

    fn validate(&self) -> Result<(), NbdError> {
        let bad = |s: &str| Err(NbdError::Config(s.into()));
        if !self.min_block.is_power_of_two() || self.min_block > 65536 {
            return bad("minimum block size must be a power of two up to 65536");
        }
        if !self.preferred_block.is_power_of_two() || self.preferred_block < self.min_block.max(512)
        {
            return bad(
                "preferred block size must be a power of two of at least 512 and the minimum",
            );
        }
        if self.max_payload < self.preferred_block || self.max_payload > MAX_PAYLOAD {
            return bad("maximum payload must be between the preferred block size and 32 MiB");
        }
        if self
            .coalesce
            .is_some_and(|d| d >= Duration::from_millis(100))
        {
            return bad("coalescing deadline must be below 100 ms");
        }
        if self.export.len() > crate::wire::MAX_NAME_LEN
            || self.description.len() > crate::wire::MAX_NAME_LEN
        {
            return bad("export name and description are limited to 4096 bytes");
        }
        match (self.tls, &self.tls_credentials) {
            (TlsMode::Off, Some(_)) => bad("TLS credentials given with TLS off"),
            (TlsMode::On | TlsMode::Require, None) => {
                bad("TLS needs credentials (a certificate directory or a PSK file)")
            }
            _ if !self.tls_verify_peer => Ok(()),
            (TlsMode::Off, _) => bad("verifying client certificates needs TLS on or required"),
            (_, Some(Credentials::Psk(_))) => {
                Err(NbdError::Config(TlsError::VerifyPeerNeedsX509.to_string()))
            }
            _ => Ok(()),
        }
    }
}

/// State every connection thread shares.
pub(crate) struct Shared {
    cfg: ServerConfig,
    size: u64,
    store: BlockStore,
    /// Loaded TLS credentials when `cfg.tls` is not off.
    tls: Option<Acceptor>,
    /// Waits that asked the kernel for more than one request (see `coalesce.rs`), summed as
    /// connections end.
    coalesced: AtomicU64,
    /// Connections whose TLS records the kernel made.
    kernel_tls: AtomicU64,
    /// I/O counters (`serve --metrics-listen`), once [`Server::counters`] turned them on.
    counters: sanbench_blockstore::counters::Switch,
}

/// Counters a caller can watch while the server runs.
pub struct ServerStats {
    pub connections: AtomicU64,
    /// Connections ended by a protocol or I/O error (hostile or broken clients).
    pub failed: AtomicU64,
    shared: Arc<Shared>,
}

impl ServerStats {
    /// Bytes holding export data: RAM chunks written and not trimmed (every chunk with
    /// `prealloc`), or the blocks the file system allocated to the file.
    pub fn allocated_bytes(&self) -> u64 {
        self.shared.store.allocated_bytes()
    }

    /// Waits, over all ended connections, in which a connection asked to be woken only once
    /// several requests had arrived (wake-up coalescing for pipelining clients).
    pub fn coalesced_waits(&self) -> u64 {
        self.shared.coalesced.load(Ordering::Relaxed)
    }

    /// Connections whose TLS records the kernel made after the handshake.
    pub fn kernel_tls_connections(&self) -> u64 {
        self.shared.kernel_tls.load(Ordering::Relaxed)
    }
}

/// A bound, not yet running server.
pub struct Server {
    /// One per address, `listen` first.
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    stats: Arc<ServerStats>,
}

impl Server {
    /// Binds the listening socket and prepares the store (port 0 picks a free port; see
    /// [`Server::local_addr`]).
    pub fn bind(cfg: ServerConfig) -> Result<Server, NbdError> {
        cfg.validate()?;
        let (store, size) = match &cfg.file {
            None => {
                if cfg.size == 0 {
                    return Err(NbdError::Config("export size must be above 0".into()));
                }
                let store = BlockStore::ram(cfg.size, cfg.prealloc)
                    .map_err(|e| NbdError::Config(e.to_string()))?;
                (store, cfg.size)
            }
            Some(path) => {
                // Created when missing, as `serve nbd --file` says (never for a read-only export).
                let (f, len) = sanbench_blockstore::open_backing(
                    path,
                    !cfg.read_only,
                    !cfg.read_only && cfg.size > 0,
                )
                .map_err(|e| NbdError::io(format!("open {}", path.display()), e))?;
                if cfg.size > len {
                    f.set_len(cfg.size)
                        .map_err(|e| NbdError::io(format!("extend {}", path.display()), e))?;
                }
                let size = if cfg.size == 0 { len } else { cfg.size };
                let store = BlockStore::file(f, size, cfg.prealloc && !cfg.read_only)
                    .map_err(|e| NbdError::Config(format!("{}: {e}", path.display())))?;
                (store, size)
            }
        };
        let tls = match &cfg.tls_credentials {
            Some(c) if cfg.tls != TlsMode::Off => {
                let a = Acceptor::new(c, cfg.tls_verify_peer);
                Some(a.map_err(|e| NbdError::Config(e.to_string()))?)
            }
            _ => None,
        };
        let mut listeners = Vec::new();
        for addr in std::iter::once(&cfg.listen).chain(&cfg.also_listen) {
            let l = TcpListener::bind(addr)
                .map_err(|e| NbdError::io(format!("listen on {addr}"), e))?;
            l.set_nonblocking(true)
                .map_err(|e| NbdError::io("set listener nonblocking", e))?;
            listeners.push(l);
        }
        let shared = Arc::new(Shared {
            cfg,
            size,
            store,
            tls,
            coalesced: AtomicU64::new(0),
            kernel_tls: AtomicU64::new(0),
            counters: Default::default(),
        });
        let stats = Arc::new(ServerStats {
            connections: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            shared: shared.clone(),
        });
        Ok(Server {
            listeners,
            shared,
            stats,
        })
    }

    /// The first address (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs()[0]
    }

    /// Every address, `listen` first.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        let given = std::iter::once(&self.shared.cfg.listen).chain(&self.shared.cfg.also_listen);
        sanbench_blockstore::portals::local_addrs(&self.listeners, given)
    }

    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Turns on the per-connection and per-export I/O counters (`serve --metrics-listen`)
    /// for connections accepted from now on, and returns them. The export is the one store,
    /// named by its export name (`default` for "").
    pub fn counters(&self) -> Arc<ServerCounters> {
        let name = match self.shared.cfg.export.as_str() {
            "" => "default".to_string(),
            e => e.to_string(),
        };
        self.shared.counters.turn_on(|| vec![name])
    }

    /// The export's size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size
    }

    /// Serves until `shutdown` becomes true, then waits for every connection thread.
    pub fn run(self, shutdown: Arc<AtomicBool>) -> Result<(), NbdError> {
        let Server {
            listeners,
            shared,
            stats,
        } = self;
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        while !shutdown.load(Ordering::Relaxed) {
            let mut accepted = None;
            for l in &listeners {
                match l.accept() {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    r => {
                        accepted = Some(r);
                        break;
                    }
                }
            }
            let Some(accepted) = accepted else {
                wait_readable(&listeners);
                continue;
            };
            match accepted {
                Ok((sock, peer)) => {
                    threads.retain(|t| !t.is_finished());
                    let number = stats.connections.fetch_add(1, Ordering::Relaxed);
                    let (sh, st, stop) = (shared.clone(), stats.clone(), shutdown.clone());
                    let t = std::thread::Builder::new()
                        .name(format!("{CONNECTION_THREAD_PREFIX}{number}"))
                        .spawn(move || {
                            if let Err(e) = connection(sock, &sh, &stop, peer, number) {
                                st.failed.fetch_add(1, Ordering::Relaxed);
                                // A refused TLS handshake (an untrusted or missing client
                                // certificate, a wrong key) is what an operator must see.
                                let tls = matches!(e, NbdError::TlsHandshake { .. });
                                if tls || std::env::var_os("SANBENCH_NBD_DEBUG").is_some() {
                                    eprintln!("nbd server: {e}");
                                }
                            }
                        })
                        .map_err(|e| NbdError::io("spawn connection thread", e))?;
                    threads.push(t);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Per-connection accept failures (ECONNABORTED, EMFILE) must not stop the server.
                Err(_) => std::thread::sleep(POLL),
            }
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }
}

/// Runs a server until `shutdown` flips.
pub fn serve(cfg: ServerConfig, shutdown: Arc<AtomicBool>) -> Result<(), NbdError> {
    Server::bind(cfg)?.run(shutdown)
}

fn connection(
    sock: TcpStream,
    sh: &Shared,
    shutdown: &AtomicBool,
    peer: SocketAddr,
    number: u64,
) -> Result<(), NbdError> {
    let setup = |e| NbdError::io(format!("set up connection from {peer}"), e);
    sock.set_nonblocking(false).map_err(setup)?;
    sock.set_nodelay(true).map_err(setup)?;
    sock.set_read_timeout(Some(POLL)).map_err(setup)?;
    if sh.cfg.coalesce.is_some() || sh.cfg.delay.is_some() {
        // Coalescing deadlines are tens of µs: the default 50 µs timer slack would double them
        // (and add up to 50 µs to every delayed reply).
        // A failure only costs precision.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1000));
    }
    match Conn::new(sock, sh, shutdown, peer.to_string(), number).run() {
        Ok(()) | Err(End::Clean) => Ok(()),
        Err(End::Fail(e)) => Err(e),
    }
}

/// Waits until a listener has a connection or [`POLL`] passes.
fn wait_readable(ls: &[TcpListener]) {
    let ts = Timespec {
        tv_sec: POLL.as_secs() as _,
        tv_nsec: POLL.subsec_nanos() as _,
    };
    // Any outcome (a connection, the time, EINTR) sends the caller back to its loop.
    let mut fds: Vec<_> = ls.iter().map(|l| PollFd::new(l, PollFlags::IN)).collect();
    let _ = rustix::event::poll(&mut fds, Some(&ts));
}
