//! The accept loop of a target that serves one store on several portals (`serve iscsi|nvme
//! --listen A --listen B`): every listener polled without blocking, each connection handed to
//! the server's own thread, and the threads waited for at shutdown. Here because both targets
//! over the store serve portals the same way (NBD keeps its own loop: it survives
//! per-connection accept failures), and the addresses the listeners got (NBD's too).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Accepts on every listener until `shutdown`; `spawn` starts a connection's thread, told the
/// index of the listener that accepted it (a port's own settings: NVMe's ANA state). An accept
/// error other than "nothing yet" or EINTR ends the loop (after the threads have ended).
pub fn accept_loop(
    listeners: &[TcpListener],
    shutdown: &AtomicBool,
    mut spawn: impl FnMut(usize, TcpStream) -> JoinHandle<()>,
) -> io::Result<()> {
    for l in listeners {
        l.set_nonblocking(true)?;
    }
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut result = Ok(());
    'serve: while !shutdown.load(Ordering::Relaxed) {
        let mut accepted = false;
        for (i, l) in listeners.iter().enumerate() {
            match l.accept() {
                Ok((s, _)) => {
                    accepted = true;
                    threads.retain(|t| !t.is_finished());
                    threads.push(spawn(i, s));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    result = Err(e);
                    break 'serve;
                }
            }
        }
        if !accepted {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for t in threads {
        let _ = t.join();
    }
    result
}

/// Every listener's address, port 0 resolved: what each was given where the kernel cannot
/// say (`given`: `listen` first, then the further portals, in the listeners' order).
pub fn local_addrs<'a>(
    listeners: &[TcpListener],
    given: impl IntoIterator<Item = &'a SocketAddr>,
) -> Vec<SocketAddr> {
    listeners
        .iter()
        .zip(given)
        .map(|(l, a)| l.local_addr().unwrap_or(*a))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_portal_is_served_and_shutdown_ends_the_loop() {
        let ls: Vec<TcpListener> = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().unwrap()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (s2, n2) = (stop.clone(), served.clone());
        let t = std::thread::spawn(move || {
            accept_loop(&ls, &s2, |i, _s| {
                let n = n2.clone();
                std::thread::spawn(move || {
                    // Each listener's index once: 1 + 2.
                    n.fetch_add(i + 1, Ordering::SeqCst);
                })
            })
        });
        for a in &addrs {
            let _c = TcpStream::connect(a).unwrap();
        }
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while served.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::SeqCst);
        t.join().unwrap().unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 3);
    }
}
