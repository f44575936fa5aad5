//! A loopback TCP forwarder a test can cut: a path of a multipath test runs through it, and
//! [`Forwarder::cut`] breaks every connection through it and turns new ones away (a link
//! going down, as the initiator sees it), [`Forwarder::restore`] lets new ones through again.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sanbench_stats::poison::lock;

struct Shared {
    cut: AtomicBool,
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

    /// Lets new connections through again.
    pub fn restore(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
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
        std::thread::spawn(move || pipe(down, up));
        std::thread::spawn(move || pipe(u2, d2));
    }
}

/// Copies `from` to `to` until either ends, then shuts both down.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
