//! Helpers shared by the tests that start real peer processes (nbdkit, qemu-nbd, tgtd) and
//! sanbench's own servers.

mod forward;
mod nbdkit;
mod peer;
mod rerun;
mod serve;
pub use forward::Forwarder;
pub use nbdkit::NbdkitPython;
pub use peer::{fio, hdr_python, nbd_greets, nbdkit_delay, spawn_nbd_peer, wait_port, Peer};
pub use rerun::rerun_with_env;
pub use serve::Served;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A loopback TCP port for a peer process to listen on.
///
/// Asking the kernel for one (`bind` to port 0, then close) races: until the peer binds it, the
/// kernel may hand the same port to any other `bind(0)` or outgoing connection in the test run
/// (tests run in parallel), and the test then talks to the wrong process. So ports come from
/// the 12000 below the kernel's ephemeral range (`ip_local_port_range`, 32768-60999 by
/// default), which the kernel never hands out by itself; within a process they are handed out
/// in turn from a start that depends on the process id, and each is checked free with a bind.
pub fn free_port() -> u16 {
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let low = ephemeral_low().saturating_sub(SPAN).max(1024);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let port = low + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{}", low + SPAN);
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Fails the test, naming the Debian package to install, when `tool` is not on the PATH (or in
/// /usr/sbin, /sbin, where tgtd lives). Interop tests are never skipped for a missing peer.
pub fn require(tool: &str, package: &str) {
    let found = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .any(|d| d.join(tool).is_file())
    });
    assert!(
        found,
        "{tool} not found: install the Debian package {package} (apt-get install {package}) to run this test"
    );
}

fn tool(name: &str) -> Command {
    require(name, "tgt");
    Command::new(name)
}

/// tgtd (Debian's `tgt`) on a free loopback port, serving one target with a RAM-backed
/// (`/dev/shm`) LUN 1; stopped with SIGKILL by its process id when dropped (tgtd ignores SIGTERM
/// while it serves), its image and control socket removed.
pub struct Tgtd {
    child: Child,
    pub port: u16,
    ctl: u32,
    pub iqn: String,
    img: PathBuf,
}

static TGTD_NEXT: AtomicU32 = AtomicU32::new(0);

impl Tgtd {
    pub fn start(size: u64) -> Tgtd {
        Tgtd::with_iqn(None, size)
    }

    /// tgtd serving `iqn` (default: a name unique to this process and call).
    pub fn with_iqn(iqn: Option<&str>, size: u64) -> Tgtd {
        let n = TGTD_NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Control ports name /var/run/tgtd/socket.N; pick one nobody uses.
        // tgtd accepts 0..=32767.
        let mut ctl = 1000 + (pid % 7000) * 4 + n % 4;
        while std::path::Path::new(&format!("/var/run/tgtd/socket.{ctl}")).exists() {
            ctl = 1000 + (ctl + 4099) % 31000;
        }
        let port = free_port();
        let img = PathBuf::from(format!("/dev/shm/sanbench-init-{pid}-{n}.img"));
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(size))
            .expect("create RAM image in /dev/shm");
        let child = tool("tgtd")
            .args(["-f", "-C", &ctl.to_string(), "--iscsi"])
            .arg(format!("portal=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tgtd");
        let t = Tgtd {
            child,
            port,
            ctl,
            iqn: iqn.map_or_else(
                || format!("iqn.2026-11.test.sanbench:init{pid}x{n}"),
                str::to_string,
            ),
            img,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while t.adm(&[
            "--op",
            "new",
            "--mode",
            "target",
            "--tid",
            "1",
            "-T",
            &t.iqn.clone(),
        ]) {
            assert!(Instant::now() < deadline, "tgtd did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        let img = t.img.to_string_lossy().to_string();
        assert!(!t.adm(&[
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--tid",
            "1",
            "--lun",
            "1",
            "-b",
            &img
        ]));
        assert!(!t.adm(&["--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"]));
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tgtd portal not listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        t
    }

    /// Runs tgtadm; returns true when it FAILED (so loops read naturally).
    fn adm(&self, args: &[&str]) -> bool {
        !tool("tgtadm")
            .args(["-C", &self.ctl.to_string(), "--lld", "iscsi"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    pub fn uri(&self) -> String {
        format!("iscsi://127.0.0.1:{}/{}/1", self.port, self.iqn)
    }

    /// Makes tgtd listen on one more loopback portal (tgtadm `--op new --mode portal`, in
    /// portal group 1 with the first) and returns its port.
    pub fn add_portal(&self) -> u16 {
        let port = free_port();
        let portal = format!("portal=127.0.0.1:{port}");
        assert!(
            !self.adm(&["--op", "new", "--mode", "portal", "--param", &portal]),
            "tgtadm: cannot add {portal}"
        );
        port
    }

    /// Sets a target parameter (tgtadm `--op update --mode target -n NAME -v VALUE`), e.g.
    /// `HeaderDigest` to `CRC32C,None` (tgtd offers no digests unless told).
    pub fn set_param(&self, name: &str, value: &str) {
        assert!(
            !self.adm(&[
                "--op", "update", "--mode", "target", "--tid", "1", "-n", name, "-v", value
            ]),
            "tgtadm: cannot set {name}={value}"
        );
    }

    /// Sets a parameter of LUN 1 (tgtadm `--op update --mode logicalunit --params NAME=VALUE`),
    /// e.g. `thin_provisioning` to `1` (LBPME in READ CAPACITY(16), GET LBA STATUS).
    pub fn set_lun_param(&self, name: &str, value: &str) {
        let kv = format!("{name}={value}");
        assert!(
            !self.adm(&[
                "--op",
                "update",
                "--mode",
                "logicalunit",
                "--tid",
                "1",
                "--lun",
                "1",
                "--params",
                &kv
            ]),
            "tgtadm: cannot set LUN parameter {kv}"
        );
    }

    /// The LUN's backing image (a sparse file in /dev/shm).
    pub fn image(&self) -> &std::path::Path {
        &self.img
    }

    /// Requires CHAP: initiators must log in as `user` with `secret` (a tgtd incoming
    /// account). With `outgoing`, the target proves itself to initiators that ask (mutual
    /// CHAP) as `(name, secret)`.
    pub fn require_chap(&self, user: &str, secret: &str, outgoing: Option<(&str, &str)>) {
        let mut accounts = vec![(user, secret, false)];
        accounts.extend(outgoing.map(|(u, s)| (u, s, true)));
        for (u, s, out) in accounts {
            assert!(!self.adm(&[
                "--op",
                "new",
                "--mode",
                "account",
                "--user",
                u,
                "--password",
                s
            ]));
            let mut bind = vec![
                "--op", "bind", "--mode", "account", "--tid", "1", "--user", u,
            ];
            if out {
                bind.push("--outgoing");
            }
            assert!(!self.adm(&bind), "tgtadm {bind:?}");
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` to tgtd (by its process id).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(self.pid(), sig) };
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Tgtd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.img);
        let _ = std::fs::remove_file(format!("/var/run/tgtd/socket.{}", self.ctl));
        let _ = std::fs::remove_file(format!("/var/run/tgtd/socket.{}.lock", self.ctl));
    }
}

/// The JSON document a successful command printed on stdout; fails the test with the
/// command's stderr when it did not succeed, or with the output when it is not one document.
pub fn ok_json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_distinct_and_below_the_ephemeral_range() {
        let a: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(a.len(), b.len(), "{a:?}");
        let low = ephemeral_low();
        assert!(a.iter().all(|&p| u32::from(p) < low && p >= 1024), "{a:?}");
        assert!(a
            .iter()
            .all(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok()));
    }
}
pub mod vm;
