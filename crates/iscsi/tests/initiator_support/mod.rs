//! Shared pieces of the initiator's interop tests: a tgtd with a RAM-backed LUN (stopped with
//! SIGKILL by its process id when dropped), our own target on a thread, and a write/read/verify
//! driver that behaves like the scheduler (tags below depth, one arena region per tag).

#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sanbench_engine::arena::fill_random;
use sanbench_engine::{Arena, Completion, Io, Op, Queue, QueueConfig, Target};
use sanbench_iscsi::target::{Target as OurTarget, TargetConfig};

/// Arena bytes per tag: the largest I/O the tests issue.
pub const SLOT: usize = 1 << 20;

pub use sanbench_testkit::free_port;

fn tool(name: &str) -> Command {
    let found = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .any(|d| d.join(name).is_file())
    });
    assert!(
        found,
        "{name} not found: install the `tgt` package (Debian: apt-get install tgt) to run this test"
    );
    Command::new(name)
}

/// A tgtd serving one target with a RAM-backed (tmpfs) LUN 1.
pub struct Tgtd {
    child: Child,
    pub port: u16,
    ctl: u32,
    pub iqn: String,
    img: PathBuf,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Tgtd {
    pub fn start(size: u64) -> Tgtd {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
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
            iqn: format!("iqn.2026-11.test.sanbench:init{pid}x{n}"),
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

/// Our own target on 127.0.0.1:0 in a thread; stopped and joined when dropped.
pub struct Ours {
    pub addr: SocketAddr,
    pub iqn: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ours {
    pub fn start(size: u64, chap: Option<(&str, &str)>) -> Ours {
        let cfg = TargetConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            lun_size: size,
            chap: chap.map(|(u, s)| (u.to_string(), s.to_string())),
            ..TargetConfig::default()
        };
        let iqn = cfg.iqn.clone();
        let t = OurTarget::bind(cfg).expect("bind our target");
        let addr = t.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = Some(std::thread::spawn(move || {
            let _ = t.run(s);
        }));
        Ours {
            addr,
            iqn,
            stop,
            thread,
        }
    }

    pub fn uri(&self, cred: Option<(&str, &str)>) -> String {
        let c = cred.map_or(String::new(), |(u, s)| format!("{u}%{s}@"));
        format!("iscsi://{c}{}/{}/0", self.addr, self.iqn)
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn qcfg(depth: u32, arena: &Arc<Arena>, timeout: Duration) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth,
        max_len: SLOT as u32,
        arena: arena.clone(),
        io_timeout: timeout,
    }
}

/// What a data run saw.
#[derive(Debug, Default)]
pub struct RunReport {
    pub ios: usize,
    /// Completions that arrived before an I/O submitted earlier.
    pub out_of_order: usize,
}

/// Drives `ios` through `q` with at most `depth` in flight, like the scheduler: each I/O uses
/// the arena slot of its tag. `before` prepares a slot before submission, `after` checks it on
/// completion.
pub fn drive(
    q: &mut dyn Queue,
    arena: &Arena,
    depth: u32,
    ios: &[(Op, u64, u32, u64)],
    mut before: impl FnMut(&mut [u8], u64, Op),
    mut after: impl FnMut(&[u8], u64, Op, i32),
) -> RunReport {
    let mut free: Vec<u32> = (0..depth).rev().collect();
    let mut slot_io: Vec<Option<(usize, u64)>> = vec![None; depth as usize];
    let mut next = 0usize;
    let mut seq = 0u64;
    let mut rep = RunReport::default();
    let mut done: Vec<Completion> = Vec::new();
    let mut finished = 0;
    while finished < ios.len() {
        let mut batch = Vec::new();
        while next < ios.len() && batch.len() < 8 {
            let Some(tag) = free.pop() else { break };
            let (op, offset, len, seed) = ios[next];
            let buf = tag as usize * SLOT;
            // SAFETY (test): the slot of a free tag is not in flight.
            before(unsafe { arena.slice_mut(buf, len as usize) }, seed, op);
            batch.push(Io {
                tag,
                op,
                offset,
                len,
                buf,
            });
            slot_io[tag as usize] = Some((next, seq));
            seq += 1;
            next += 1;
        }
        if !batch.is_empty() {
            q.submit(&batch).expect("submit");
        }
        done.clear();
        q.reap(1, &mut done).expect("reap");
        let mut oldest = slot_io.iter().flatten().map(|s| s.1).min().unwrap_or(0);
        for c in &done {
            let (i, s) = slot_io[c.tag as usize]
                .take()
                .expect("completion for a free tag");
            if s != oldest {
                rep.out_of_order += 1;
            }
            oldest = slot_io.iter().flatten().map(|s| s.1).min().unwrap_or(0);
            let (op, _, len, seed) = ios[i];
            // SAFETY (test): the I/O completed.
            after(
                unsafe { arena.slice(c.tag as usize * SLOT, len as usize) },
                seed,
                op,
                c.result,
            );
            free.push(c.tag);
            finished += 1;
        }
    }
    rep.ios = ios.len();
    rep
}

/// Sizes from 512 B to 1 MiB: above MaxRecvDataSegmentLength and FirstBurstLength, so reads
/// span several Data-In PDUs and writes need R2Ts.
pub const SIZES: [u32; 8] = [
    512,
    4096,
    3 * 512,
    64 * 1024,
    128 * 1024 + 512,
    300 * 1024,
    768 * 1024,
    1 << 20,
];

/// Writes random patterns at scattered, non-overlapping offsets at depth 32, reads them back
/// and compares. Returns the read pass's report.
pub fn write_read_verify(target: &dyn Target, count: usize) -> RunReport {
    let depth = 32u32;
    let arena = Arc::new(Arena::new(depth as usize * SLOT));
    let mut q = target
        .open_queue(&qcfg(depth, &arena, Duration::from_secs(20)))
        .expect("open queue");
    let size = target.info().size;
    let stride = size / count as u64 / 4096 * 4096;
    assert!(stride >= 2 * SLOT as u64, "LUN too small for {count} I/Os");
    let ios: Vec<(Op, u64, u32, u64)> = (0..count)
        .map(|i| {
            let len = SIZES[i % SIZES.len()];
            // Scattered: a pseudo-random sector inside each stride, order shuffled below.
            let jitter = (i as u64 * 0x9e37_79b9) % ((stride - len as u64) / 512) * 512;
            (Op::Write, i as u64 * stride + jitter, len, 1000 + i as u64)
        })
        .collect();
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&i| (i as u64 * 0x5851_f42d) % 1009);
    let writes: Vec<_> = order.iter().map(|&i| ios[i]).collect();
    let w = drive(
        q.as_mut(),
        &arena,
        depth,
        &writes,
        |buf, seed, _| fill_random(buf, seed),
        |_, seed, _, r| assert_eq!(r, 0, "write of pattern {seed} failed"),
    );
    let reads: Vec<_> = writes
        .iter()
        .map(|&(_, o, l, s)| (Op::Read, o, l, s))
        .collect();
    let mut want = vec![0u8; SLOT];
    let r = drive(
        q.as_mut(),
        &arena,
        depth,
        &reads,
        |buf, _, _| buf.fill(0xee),
        |buf, seed, _, res| {
            assert_eq!(res, 0, "read of pattern {seed} failed");
            fill_random(&mut want[..buf.len()], seed);
            assert!(buf == &want[..buf.len()], "pattern {seed} read back wrong");
        },
    );
    let stats = q.stats();
    eprintln!("write pass {w:?}, read pass {r:?}, queue stats {stats:?}");
    q.close().expect("logout");
    r
}
