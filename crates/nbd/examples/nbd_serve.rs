//! Runs the sanbench NBD server until interrupted (Ctrl-C / SIGTERM kill it):
//! `cargo run --release -p sanbench-nbd --example nbd_serve -- 127.0.0.1:10809 1073741824 [FILE]`

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use sanbench_nbd::{Server, ServerConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:10809".into());
    let size: u64 = args
        .next()
        .map_or(1 << 30, |s| s.parse().expect("size in bytes"));
    let mut cfg = ServerConfig::ram(listen.parse().expect("HOST:PORT"), size);
    cfg.file = args.next().map(Into::into);
    let server = Server::bind(cfg).unwrap_or_else(|e| {
        eprintln!("nbd_serve: {e}");
        std::process::exit(1)
    });
    println!("serving nbd://{}/", server.local_addr());
    if let Err(e) = server.run(Arc::new(AtomicBool::new(false))) {
        eprintln!("nbd_serve: {e}");
        std::process::exit(1);
    }
}
