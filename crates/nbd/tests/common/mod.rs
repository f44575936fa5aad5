//! Helpers for the interop tests: start peers on free loopback ports, stop them by PID.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use sanbench_nbd::{Server, ServerConfig};

/// A port nothing listens on right now.
pub use sanbench_testkit::free_port;

pub use sanbench_testkit::require;

/// A peer process, killed (by PID) and reaped on drop.
pub struct Peer {
    pub child: Child,
    pub port: u16,
}

impl Peer {
    pub fn start(mut cmd: Command, port: u16) -> Peer {
        let child = sanbench_testkit::spawn_nbd_peer(&mut cmd, port);
        Peer { child, port }
    }

    pub fn uri(&self, export: &str) -> String {
        format!("nbd://127.0.0.1:{}/{export}", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn nbdkit_memory(size: &str) -> Peer {
    require("nbdkit", "nbdkit");
    let port = free_port();
    let mut cmd = Command::new("nbdkit");
    cmd.args([
        "-f",
        "-i",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "memory",
        size,
    ]);
    Peer::start(cmd, port)
}

/// qemu-nbd over a sparse image file; the TempDir must outlive the peer.
pub fn qemu_nbd(name: &str, size: u64) -> (Peer, tempfile::TempDir) {
    require("qemu-nbd", "qemu-utils");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img).unwrap().set_len(size).unwrap();
    let port = free_port();
    let mut cmd = Command::new("qemu-nbd");
    cmd.args([
        "-f",
        "raw",
        "-x",
        name,
        "-p",
        &port.to_string(),
        "-b",
        "127.0.0.1",
        "--persistent",
    ])
    .arg(&img);
    (Peer::start(cmd, port), dir)
}

/// Our server on an ephemeral loopback port, stopped and joined on drop.
pub struct OurServer {
    pub addr: SocketAddr,
    pub stop: Arc<AtomicBool>,
    pub stats: Arc<sanbench_nbd::server::ServerStats>,
    thread: Option<JoinHandle<()>>,
}

impl OurServer {
    pub fn start(cfg: ServerConfig) -> OurServer {
        let server = Server::bind(cfg).expect("bind server");
        let addr = server.local_addr();
        let stats = server.stats();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || server.run(s).expect("server run"));
        OurServer {
            addr,
            stop,
            stats,
            thread: Some(thread),
        }
    }

    pub fn ram(size: u64, export: &str) -> OurServer {
        let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), size);
        cfg.export = export.into();
        OurServer::start(cfg)
    }

    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.addr)
    }
}

impl Drop for OurServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Deterministic pseudo-random bytes.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}
