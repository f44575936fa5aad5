//! A loopback TCP forwarder a test can cut: a path of a multipath test runs through it, and
//! [`Forwarder::cut`] breaks every connection through it and turns new ones away (a link
//! going down, as the initiator sees it), [`Forwarder::silence`] stops carrying bytes without
//! closing anything (a pulled cable: only a timeout tells), [`Forwarder::restore`] lets new
//! connections through again.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sanbench_stats::poison::lock;

struct Shared {
    cut: AtomicBool,
    /// Silenced: nothing is carried; connections made before or during it never carry again.
    silent: AtomicBool,
    /// Bumped by each silence: a connection of an older generation is dead.
    gen: AtomicU64,
    stop: AtomicBool,
    /// Both ends of every connection made, so that a cut can shut them down.
    conns: Mutex<Vec<TcpStream>>,
}

/// Forwards 127.0.0.1:`port()` to one upstream address until dropped.
pub struct Forwarder {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Forwarder {
    pub fn start(upstream: SocketAddr) -> Forwarder {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the forwarder");
        l.set_nonblocking(true).expect("nonblocking listener");
        let addr = l.local_addr().expect("forwarder address");
        let shared = Arc::new(Shared {
            cut: AtomicBool::new(false),
            silent: AtomicBool::new(false),
            gen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let sh = shared.clone();
        std::thread::spawn(move || accept(l, upstream, sh));
        Forwarder { addr, shared }
    }

    /// `127.0.0.1:PORT`, to put in a URI.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Breaks every connection (both directions shut down) and refuses new ones.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        for c in lock(&self.shared.conns).drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Carries nothing from now on, in either direction, and closes nothing: bytes sent are
    /// dropped, new connections are accepted and never answered. Those connections stay dead
    /// after [`restore`](Self::restore), as after a real outage the initiator has given up on.
    pub fn silence(&self) {
        self.shared.silent.store(true, Ordering::SeqCst);
        self.shared.gen.fetch_add(1, Ordering::SeqCst);
    }

    /// Lets new connections through again.
    pub fn restore(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
        self.shared.silent.store(false, Ordering::SeqCst);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}

fn accept(l: TcpListener, upstream: SocketAddr, sh: Arc<Shared>) {
    while !sh.stop.load(Ordering::SeqCst) {
        let Ok((down, _)) = l.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        if sh.cut.load(Ordering::SeqCst) {
            continue; // dropped: the client sees the connection closed
        }
        let _ = down.set_nonblocking(false);
        let gen = if sh.silent.load(Ordering::SeqCst) {
            u64::MAX
        } else {
            sh.gen.load(Ordering::SeqCst)
        };
        let Ok(up) = TcpStream::connect(upstream) else {
            continue;
        };
        let _ = (down.set_nodelay(true), up.set_nodelay(true));
        let (Ok(d2), Ok(u2)) = (down.try_clone(), up.try_clone()) else {
            continue;
        };
        {
            let mut conns = lock(&sh.conns);
            for s in [&down, &up] {
                if let Ok(c) = s.try_clone() {
                    conns.push(c);
                }
            }
        }
        let sh2 = sh.clone();
        let sh3 = sh.clone();
        std::thread::spawn(move || pipe(down, up, &sh2, gen));
        std::thread::spawn(move || pipe(u2, d2, &sh3, gen));
    }
}

/// Copies `from` to `to` until either ends, then shuts both down; a connection of generation
/// `gen` drops what it reads once a silence has begun.
fn pipe(mut from: TcpStream, mut to: TcpStream, sh: &Shared, gen: u64) {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let dead = sh.silent.load(Ordering::SeqCst) || sh.gen.load(Ordering::SeqCst) != gen;
                if !dead && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
