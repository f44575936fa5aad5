//! Peer processes: one a test started itself (nbdkit, a server of its own), ended with the
//! test and waited for until it listens or, an NBD server, greets; fio, found where deps.sh
//! installs it; python3 reading a histogram log.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (and reaped) when dropped, so a failing test leaves no peer behind.
pub struct Peer(pub Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 10 s for something to accept connections on 127.0.0.1:`port`.
pub fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nbdkit serving 64 MiB of memory on 127.0.0.1:`port` through its delay filter, every read
/// and write taking `delay` (e.g. `2ms`) at the server; listening when it returns.
pub fn nbdkit_delay(port: u16, delay: &str) -> Peer {
    crate::require("nbdkit", "nbdkit");
    let child = Command::new("nbdkit")
        .args(["-f", "-p", &port.to_string(), "-i", "127.0.0.1"])
        .args(["--filter=delay", "memory", "64M"])
        .arg(format!("rdelay={delay}"))
        .arg(format!("wdelay={delay}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let peer = Peer(child);
    wait_port(port);
    peer
}

/// fio, waiting for it while another process installs it.
pub fn fio() -> &'static str {
    for _ in 0..120 {
        if std::path::Path::new("/usr/bin/fio").exists() {
            return "/usr/bin/fio";
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("fio is not installed (scripts/deps.sh installs it)");
}

/// What python3 prints running `script` (one that reads an HdrHistogram log with the
/// `hdrhistogram` package) with `args`; fails the test, naming what installs the package,
/// when the script fails.
pub fn hdr_python<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "the hdrhistogram Python package must read the log (scripts/deps.sh installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// True when a server on 127.0.0.1:`port` sends the NBD greeting's magic: an NBD peer is
/// ready once it serves, not once it listens (a first connection has been seen reset during
/// the handshake of a peer that only listened).
pub fn nbd_greets(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let mut magic = [0u8; 8];
    s.set_read_timeout(Some(Duration::from_secs(1))).is_ok()
        && s.read_exact(&mut magic).is_ok()
        && &magic == b"NBDMAGIC"
}

/// `cmd` started (stdin and stdout to /dev/null) as an NBD server on 127.0.0.1:`port`,
/// returned once it greets: ready means serving, a listening socket alone is not enough (a
/// first connection has been seen reset during the handshake in a full test run). Fails the
/// test, the child killed, when it exits first or has not greeted within 15 s.
pub fn spawn_nbd_peer(cmd: &mut Command, port: u16) -> Child {
    let program = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !nbd_greets(port) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{program} exited early: {status}");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} did not greet NBD clients on {port}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}
