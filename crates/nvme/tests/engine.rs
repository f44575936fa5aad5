//! The `nvme+tcp://` engine against the crate's target: every op through the Queue trait
//! (in-capsule and R2T writes, reads into the arena, trim, flush), and a controller that goes
//! silent ending `reap` with a typed timeout instead of hanging.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sanbench_io::{Arena, EngineError, Io, Op, QueueConfig};
use sanbench_nvme::target::{Target, TargetConfig};

const NQN: &str = "nqn.2026-11.io.sanbench:engine";

fn start() -> (SocketAddr, Arc<AtomicBool>) {
    let t = Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        nqn: NQN.into(),
        size: 16 << 20,
        ..TargetConfig::default()
    })
    .unwrap();
    let addr = t.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || t.run(s).unwrap());
    (addr, stop)
}

/// A TCP relay in front of `to` that stops passing bytes (both ways) once `frozen` is set,
/// as a controller that hangs does.
fn relay(to: SocketAddr, frozen: Arc<AtomicBool>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(a) = c else { return };
            let b = TcpStream::connect(to).unwrap();
            for (mut from, mut into) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)] {
                let frozen = frozen.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    from.set_read_timeout(Some(Duration::from_millis(20)))
                        .unwrap();
                    loop {
                        if frozen.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                        match from.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => {
                                if into.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => return,
                        }
                    }
                });
            }
        }
    });
    addr
}

/// The socket layers this kernel runs, as `sockio=` names them: the poll loop, and io_uring
/// where the kernel has what the layer needs (else said on stderr). Each test runs on each,
/// asked for explicitly.
fn layers() -> Vec<&'static str> {
    // The rerun with io_uring features forced on runs the ring alone.
    if std::env::var_os(sanbench_io::sockring::conn::FEATURES_ENV).is_some() {
        return vec!["uring"];
    }
    match sanbench_io::SockRing::probe() {
        Ok(()) => vec!["poll", "uring"],
        Err(e) => {
            eprintln!("io_uring layer skipped: {e}");
            vec!["poll"]
        }
    }
}

/// Every test here again on io_uring with zero-copy sends (1 MiB writes) and the multishot
/// receive (every PDU) forced on.
#[test]
fn every_test_passes_again_with_sendzc_and_multishot() {
    let asked = "sendzc,multishot";
    if sanbench_io::SockRing::probe().is_err() {
        return;
    }
    if let (_, Some(why)) = sanbench_io::RingFeatures::parse(asked).unwrap().choose() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = sanbench_testkit::rerun_with_env(
        &[(sanbench_io::sockring::conn::FEATURES_ENV, asked)],
        &["--skip", "every_test_passes_again"],
    );
    assert!(r.is_ok(), "{}", r.unwrap_err());
}

fn qcfg(arena: &Arc<Arena>, timeout: Duration) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth: 8,
        max_len: 1 << 20,
        arena: arena.clone(),
        io_timeout: timeout,
        socket_ring: None,
    }
}

fn io(tag: u32, op: Op, offset: u64, len: u32, buf: usize) -> Io {
    Io {
        tag,
        op,
        offset,
        len,
        buf,
        fua: false,
    }
}

#[test]
fn every_op_through_the_queue() {
    for layer in layers() {
        every_op_on(layer);
    }
}

fn every_op_on(layer: &str) {
    let (addr, stop) = start();
    let t =
        sanbench_nvme::initiator::open(&format!("nvme+tcp://{addr}/{NQN}?sockio={layer}")).unwrap();
    assert_eq!(t.info().params["socket"], layer);
    if layer == "uring" {
        // The features asked (under the rerun: both) are the ones that ran.
        let on = sanbench_io::RingFeatures::from_env_chosen().name();
        assert_eq!(t.info().params["socket_features"], on.as_str());
    }
    assert_eq!(t.info().size, 16 << 20);
    assert_eq!(t.info().block_size, 512);
    assert_eq!(t.info().max_transfer, Some(1 << 20));
    let arena = Arc::new(Arena::new(4 << 20));
    arena.fill_random(7);
    let mut q = t.open_queue(&qcfg(&arena, Duration::from_secs(5))).unwrap();
    // Slots: [0, 1 MiB) the write source, [2 MiB, 3 MiB) the read destination.
    let mut done = Vec::new();
    q.submit(&[
        io(0, Op::Write, 0, 4096, 0),
        io(1, Op::Write, 1 << 20, 1 << 20, 0),
        io(2, Op::Flush, 0, 0, 0),
    ])
    .unwrap();
    q.reap(3, &mut done).unwrap();
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    done.clear();
    q.submit(&[io(3, Op::Read, 1 << 20, 1 << 20, 2 << 20)])
        .unwrap();
    q.reap(1, &mut done).unwrap();
    assert_eq!(done[0].result, 0);
    // SAFETY: no I/O is in flight.
    let (w, r) = unsafe { (arena.slice(0, 1 << 20), arena.slice(2 << 20, 1 << 20)) };
    assert!(w == r, "read back differs");
    // Trim, then the range reads as zeros.
    done.clear();
    q.submit(&[io(4, Op::Trim, 1 << 20, 1 << 20, 0)]).unwrap();
    q.reap(1, &mut done).unwrap();
    q.submit(&[io(5, Op::Read, 1 << 20, 4096, 2 << 20)])
        .unwrap();
    q.reap(1, &mut done).unwrap();
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    // SAFETY: no I/O is in flight.
    assert!(unsafe { arena.slice(2 << 20, 4096) }
        .iter()
        .all(|&b| b == 0));
    // Past the end: a failed completion, not a broken queue.
    done.clear();
    q.submit(&[io(6, Op::Read, 16 << 20, 4096, 2 << 20)])
        .unwrap();
    q.reap(1, &mut done).unwrap();
    assert!(done[0].result < 0);
    assert!(q.stats()["in_capsule_writes"] == 1 && q.stats()["r2t_writes"] == 1);
    assert_eq!(q.stats()["nvme_socket"], layer);
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn a_silent_controller_is_a_timeout() {
    for layer in layers() {
        a_silent_controller_on(layer);
    }
}

fn a_silent_controller_on(layer: &str) {
    let (addr, stop) = start();
    let frozen = Arc::new(AtomicBool::new(false));
    let via = relay(addr, frozen.clone());
    let t =
        sanbench_nvme::initiator::open(&format!("nvme+tcp://{via}/{NQN}?kato=0&sockio={layer}"))
            .unwrap();
    let arena = Arc::new(Arena::new(1 << 20));
    let mut q = t
        .open_queue(&qcfg(&arena, Duration::from_millis(500)))
        .unwrap();
    let mut done = Vec::new();
    q.submit(&[io(0, Op::Read, 0, 4096, 0)]).unwrap();
    q.reap(1, &mut done).unwrap();
    frozen.store(true, Ordering::Relaxed);
    // Let both pumps finish the read they are in (20 ms timeouts) and see the flag.
    std::thread::sleep(Duration::from_millis(100));
    q.submit(&[io(1, Op::Read, 0, 4096, 0)]).unwrap();
    let t0 = Instant::now();
    let e = q.reap(1, &mut done).unwrap_err();
    assert!(matches!(e, EngineError::Timeout { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
}

/// 1 MiB reads and R2T writes at once, 32 in flight: while the host sends a write's H2CData
/// the controller sends reads' C2HData, both sockets fill, and a host that only wrote while
/// sending waited on a controller that only wrote too (until a send timeout; `run` of 1 MiB
/// 70/30 at QD 32 failed every time). The host now reads while it cannot send.
#[test]
fn mixed_large_io_at_depth_does_not_deadlock() {
    for layer in layers() {
        mixed_large_io_on(layer);
    }
}

fn mixed_large_io_on(layer: &str) {
    let (addr, stop) = start();
    let t =
        sanbench_nvme::initiator::open(&format!("nvme+tcp://{addr}/{NQN}?sockio={layer}")).unwrap();
    let mib = 1usize << 20;
    let arena = Arc::new(Arena::new(32 * mib));
    arena.fill_random(9);
    let mut cfg = qcfg(&arena, Duration::from_secs(5));
    cfg.depth = 32;
    let mut q = t.open_queue(&cfg).unwrap();
    let started = Instant::now();
    for round in 0..6u64 {
        let ios: Vec<Io> = (0..32u32)
            .map(|tag| {
                let op = if (tag + round as u32).is_multiple_of(3) {
                    Op::Write
                } else {
                    Op::Read
                };
                io(
                    tag,
                    op,
                    (tag as u64 % 16) * mib as u64,
                    mib as u32,
                    tag as usize * mib,
                )
            })
            .collect();
        q.submit(&ios).unwrap();
        let mut done = Vec::new();
        q.reap(32, &mut done).unwrap();
        assert_eq!(done.len(), 32);
        assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    stop.store(true, Ordering::Relaxed);
}

/// A Write Zeroes longer than one command may cover (the target's MDTS, 1 MiB) goes as a
/// chain of commands on its tag: one completion, every block zeroed, the data around it kept.
#[test]
fn a_long_write_zeroes_is_split_into_commands_within_the_mdts() {
    let (addr, stop) = start();
    let t = sanbench_nvme::initiator::open(&format!("nvme+tcp://{addr}/{NQN}")).unwrap();
    assert_eq!(t.info().max_transfer, Some(1 << 20));
    let arena = Arc::new(Arena::new(4 << 20));
    arena.fill_random(9);
    let mut q = t.open_queue(&qcfg(&arena, Duration::from_secs(5))).unwrap();
    let mut done = Vec::new();
    // 6 MiB of data from 1 MiB on, then zeroes over [2 MiB, 6.5 MiB): five commands.
    for (i, off) in (1..7u64).enumerate() {
        q.submit(&[io(i as u32, Op::Write, off << 20, 1 << 20, 0)])
            .unwrap();
    }
    q.reap(6, &mut done).unwrap();
    assert!(done.iter().all(|c| c.result == 0), "{done:?}");
    done.clear();
    let (start_z, len_z) = (2u64 << 20, (4 << 20) + (1 << 19));
    q.submit(&[io(7, Op::WriteZeroes, start_z, len_z as u32, 0)])
        .unwrap();
    q.reap(1, &mut done).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].result, 0, "{done:?}");
    assert_eq!(q.stats()["write_zeroes_commands"], 5, "{:?}", q.stats());
    // Each piece's first and last 4 KiB zeroed, the data just outside the range kept.
    let (m, k) = (1u64 << 20, 4096u64);
    let mut expect = vec![(start_z - k, false), (start_z + len_z, false)];
    for (a, b) in [
        (2 * m, 3 * m),
        (3 * m, 4 * m),
        (4 * m, 5 * m),
        (5 * m, 6 * m),
        (6 * m, start_z + len_z),
    ] {
        expect.push((a, true));
        expect.push((b - k, true));
    }
    for (off, zeros) in expect {
        let mut d = Vec::new();
        q.submit(&[io(0, Op::Read, off, 4096, 2 << 20)]).unwrap();
        q.reap(1, &mut d).unwrap();
        assert_eq!(d[0].result, 0);
        // SAFETY: no I/O is in flight.
        let r = unsafe { arena.slice(2 << 20, 4096) };
        assert_eq!(r.iter().all(|&b| b == 0), zeros, "at {off}");
    }
    stop.store(true, Ordering::Relaxed);
}
