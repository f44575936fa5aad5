//! The client engine against real servers (nbdkit, qemu-nbd) and against our own server, plus
//! failure modes: a silent server must time out, a killed one must read as disconnected.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{nbdkit_memory, pattern, qemu_nbd, OurServer};
use sanbench_io::{Arena, Completion, EngineError, Io, Op, Queue, QueueConfig, Target};
use sanbench_nbd::{open, ClientOptions};

const BS: usize = 64 * 1024;

fn qcfg(depth: u32, arena: &Arc<Arena>, timeout: Duration) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth,
        max_len: BS as u32,
        arena: arena.clone(),
        io_timeout: timeout,
        socket_ring: None,
    }
}

fn wait_all(q: &mut dyn Queue, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < n {
        q.reap(n - out.len(), &mut out).expect("reap");
    }
    out
}

/// Writes patterns at varied offsets and lengths through one queue at depth 32, reads them back
/// into other arena regions and compares; also checks that completions came out of order at
/// least once or all arrived (pipelined) in one reap.
fn write_read_verify(target: &dyn Target, opts_label: &str) {
    let depth = 32u32;
    let arena = Arc::new(Arena::new(2 * depth as usize * BS));
    let mut q = target
        .open_queue(&qcfg(depth, &arena, Duration::from_secs(10)))
        .expect("open queue");
    let size = target.info().size;
    // (offset, len) pairs: unaligned small ones, 4K, a 64K one, one at the very end.
    let mut ios = Vec::new();
    for i in 0..depth as u64 {
        let len = match i % 4 {
            0 => 512,
            1 => 4096,
            2 => 1000 + i as u32 * 7,
            _ => BS as u32,
        };
        let offset = if i == depth as u64 - 1 {
            size - len as u64
        } else {
            (i * 1_048_573 + 512 * i) % (size - BS as u64)
        };
        ios.push((offset, len));
    }
    // Non-overlapping: spread offsets so no two ranges touch.
    ios.sort();
    for w in 1..ios.len() {
        let prev_end = ios[w - 1].0 + ios[w - 1].1 as u64;
        if ios[w].0 < prev_end {
            ios[w].0 = prev_end;
        }
    }
    assert!(ios.last().unwrap().0 + ios.last().unwrap().1 as u64 <= size);
    let data: Vec<Vec<u8>> = ios
        .iter()
        .enumerate()
        .map(|(i, (_, l))| pattern(*l as usize, i as u64 + 1))
        .collect();
    let writes: Vec<Io> = ios
        .iter()
        .enumerate()
        .map(|(i, &(offset, len))| {
            // SAFETY (test): nothing is in flight yet.
            unsafe { arena.slice_mut(i * BS, len as usize) }.copy_from_slice(&data[i]);
            Io {
                fua: false,
                tag: i as u32,
                op: Op::Write,
                offset,
                len,
                buf: i * BS,
            }
        })
        .collect();
    q.submit(&writes).unwrap();
    let done = wait_all(q.as_mut(), writes.len());
    assert!(done.iter().all(|c| c.result == 0), "{opts_label}: {done:?}");
    let reads: Vec<Io> = ios
        .iter()
        .enumerate()
        .map(|(i, &(offset, len))| Io {
            fua: false,
            tag: i as u32,
            op: Op::Read,
            offset,
            len,
            buf: (depth as usize + i) * BS,
        })
        .collect();
    q.submit(&reads).unwrap();
    let done = wait_all(q.as_mut(), reads.len());
    let tags: HashSet<u32> = done.iter().map(|c| c.tag).collect();
    assert_eq!(tags.len(), reads.len(), "{opts_label}: every tag once");
    for c in &done {
        assert_eq!(c.result, 0, "{opts_label}: {c:?}");
        let i = c.tag as usize;
        // SAFETY (test): all I/O reaped.
        let got = unsafe { arena.slice((depth as usize + i) * BS, ios[i].1 as usize) };
        assert!(
            got == &data[i][..],
            "{opts_label}: data mismatch for io {i} at {:?}",
            ios[i]
        );
    }
    // Flush and trim go through.
    q.submit(&[
        Io {
            fua: false,
            tag: 0,
            op: Op::Flush,
            offset: 0,
            len: 0,
            buf: 0,
        },
        Io {
            fua: false,
            tag: 1,
            op: Op::Trim,
            offset: 0,
            len: 4096,
            buf: 0,
        },
    ])
    .unwrap();
    let done = wait_all(q.as_mut(), 2);
    assert!(done.iter().all(|c| c.result == 0), "{opts_label}: {done:?}");
    // A read past the end fails with an errno, not a broken connection.
    q.submit(&[Io {
        fua: false,
        tag: 2,
        op: Op::Read,
        offset: size,
        len: 4096,
        buf: 0,
    }])
    .unwrap();
    let done = wait_all(q.as_mut(), 1);
    assert!(
        done[0].result < 0,
        "{opts_label}: read past end gave {done:?}"
    );
    q.close().unwrap();
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn round_trips_pass_again_on_io_uring_with_sendzc_and_multishot() {
    let asked = "sendzc,multishot";
    if let Err(e) = sanbench_io::SockRing::probe() {
        eprintln!("skipped: {e}");
        return;
    }
    if let (_, Some(why)) = sanbench_io::RingFeatures::parse(asked).unwrap().choose() {
        eprintln!("skipped: {why}");
        return;
    }
    let r = sanbench_testkit::rerun_with_env(
        &[
            (sanbench_io::sockring::conn::FEATURES_ENV, asked),
            (sanbench_io::sockring::SOCKET_ENV, "uring"),
        ],
        &["round_trip", "--skip", "round_trips_pass_again"],
    );
    assert!(r.is_ok(), "{}", r.unwrap_err());
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn nbdkit_memory_round_trip_both_reply_kinds() {
    let peer = nbdkit_memory("64M");
    for structured in [true, false] {
        let opts = ClientOptions {
            structured_replies: structured,
            ..Default::default()
        };
        let t = open(&peer.uri(""), &opts).expect("open nbdkit");
        let info = t.info();
        assert_eq!(info.size, 64 << 20);
        assert_eq!(info.engine, "nbd");
        assert_eq!(info.params["structured_replies"], structured);
        write_read_verify(t.as_ref(), &format!("nbdkit structured={structured}"));
    }
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs qemu-nbd")]
fn qemu_nbd_round_trip() {
    let (peer, _dir) = qemu_nbd("disk0", 32 << 20);
    let t = open(&peer.uri("disk0"), &ClientOptions::default()).expect("open qemu-nbd");
    assert_eq!(t.info().size, 32 << 20);
    assert_eq!(t.info().params["canonical_name"], "disk0");
    // qemu-nbd advertises a 512-byte minimum block for raw files? Respect whatever it says.
    let bs = t.info().block_size;
    assert!(bs == 1 || bs == 512, "block size {bs}");
    if bs == 1 {
        write_read_verify(t.as_ref(), "qemu-nbd");
    } else {
        aligned_round_trip(t.as_ref());
    }
    assert!(open(&peer.uri("nosuch"), &ClientOptions::default()).is_err());
}

fn aligned_round_trip(t: &dyn Target) {
    let arena = Arc::new(Arena::new(64 * BS));
    let mut q = t
        .open_queue(&qcfg(32, &arena, Duration::from_secs(10)))
        .unwrap();
    let data = pattern(32 * 4096, 9);
    unsafe { arena.slice_mut(0, data.len()) }.copy_from_slice(&data);
    let w: Vec<Io> = (0..32u32)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Write,
            offset: i as u64 * 8192,
            len: 4096,
            buf: i as usize * 4096,
        })
        .collect();
    q.submit(&w).unwrap();
    assert!(wait_all(q.as_mut(), 32).iter().all(|c| c.result == 0));
    let r: Vec<Io> = w
        .iter()
        .map(|io| Io {
            op: Op::Read,
            buf: 32 * BS + io.buf,
            ..*io
        })
        .collect();
    q.submit(&r).unwrap();
    assert!(wait_all(q.as_mut(), 32).iter().all(|c| c.result == 0));
    assert!(unsafe { arena.slice(32 * BS, data.len()) } == &data[..]);
    q.close().unwrap();
}

#[test]
fn our_server_round_trip_and_out_of_order() {
    let srv = OurServer::ram(256 << 20, "mem");
    for structured in [true, false] {
        let opts = ClientOptions {
            structured_replies: structured,
            ..Default::default()
        };
        let t = open(&srv.uri("mem"), &opts).unwrap();
        assert_eq!(t.info().size, 256 << 20);
        assert_eq!(t.info().params["can_multi_conn"], true);
        write_read_verify(t.as_ref(), &format!("ours structured={structured}"));
    }
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn out_of_order_completions_at_depth_32() {
    // nbdkit with a delay filter that is longer for low offsets makes replies overtake.
    common::require("nbdkit", "nbdkit");
    let port = common::free_port();
    let mut cmd = std::process::Command::new("nbdkit");
    cmd.args([
        "-f",
        "-i",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "32",
        "memory",
        "64M",
    ]);
    let peer = common::Peer::start(cmd, port);
    let t = open(&peer.uri(""), &ClientOptions::default()).unwrap();
    let arena = Arc::new(Arena::new(32 * BS));
    let mut q = t
        .open_queue(&qcfg(32, &arena, Duration::from_secs(10)))
        .unwrap();
    let mut saw_out_of_order = false;
    for round in 0..50 {
        // A mix of big and small reads: small ones tend to finish first.
        let ios: Vec<Io> = (0..32u32)
            .map(|i| Io {
                fua: false,
                tag: i,
                op: Op::Read,
                offset: (i as u64 * BS as u64 + round * 4096) % (60 << 20),
                len: if i % 2 == 0 { BS as u32 } else { 512 },
                buf: i as usize * BS,
            })
            .collect();
        q.submit(&ios).unwrap();
        let done = wait_all(q.as_mut(), 32);
        assert!(done.iter().all(|c| c.result == 0));
        let tags: Vec<u32> = done.iter().map(|c| c.tag).collect();
        if tags.windows(2).any(|w| w[0] > w[1]) {
            saw_out_of_order = true;
        }
    }
    assert!(
        saw_out_of_order,
        "nbdkit with 32 threads never reordered 1600 replies"
    );
}

#[test]
fn silent_server_times_out() {
    // Accepts and never says a word: open() must fail within the connect timeout.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("nbd://{}/", l.local_addr().unwrap());
    let keep = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        drop(s);
    });
    let opts = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let t0 = Instant::now();
    let err = open(&uri, &opts).err().expect("open must fail");
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    keep.join().unwrap();
}

/// A fake server that negotiates properly (export of 1 MiB) and then reads requests without
/// ever answering. Serves connections until the test ends.
fn mute_server() -> std::net::SocketAddr {
    use sanbench_nbd::wire::handshake::*;
    use sanbench_nbd::wire::Parsed;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { return };
            std::thread::spawn(move || {
                let mut out = Vec::new();
                Greeting {
                    flags: hflags::FIXED_NEWSTYLE,
                }
                .encode(&mut out);
                c.write_all(&out).unwrap();
                let mut buf = vec![0u8; 4];
                c.read_exact(&mut buf).unwrap();
                loop {
                    let mut b = vec![0u8; 16];
                    if c.read_exact(&mut b).is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes(b[12..16].try_into().unwrap()) as usize;
                    let mut rest = vec![0u8; len];
                    c.read_exact(&mut rest).unwrap();
                    b.extend_from_slice(&rest);
                    let Ok(Parsed::Done { value, .. }) = ClientOption::decode(&b) else {
                        return;
                    };
                    let mut out = Vec::new();
                    let go = matches!(value, ClientOption::Go(_));
                    if go {
                        OptionReply {
                            option: opt::GO,
                            body: ReplyBody::Info(Info::Export {
                                size: 1 << 20,
                                flags: tflags::HAS_FLAGS,
                            }),
                        }
                        .encode(&mut out);
                        OptionReply {
                            option: opt::GO,
                            body: ReplyBody::Ack,
                        }
                        .encode(&mut out);
                    } else {
                        OptionReply {
                            option: value.number(),
                            body: ReplyBody::Error {
                                code: rep::ERR_UNSUP,
                                message: String::new(),
                            },
                        }
                        .encode(&mut out);
                    }
                    c.write_all(&out).unwrap();
                    if go {
                        break;
                    }
                }
                // Swallow requests forever (until the client leaves).
                let mut sink = [0u8; 4096];
                while matches!(c.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

#[test]
fn server_that_stops_answering_times_out_in_reap() {
    let addr = mute_server();
    let t = open(&format!("nbd://{addr}/"), &ClientOptions::default()).unwrap();
    assert_eq!(t.info().size, 1 << 20);
    let arena = Arc::new(Arena::new(BS));
    let mut q = t
        .open_queue(&qcfg(4, &arena, Duration::from_millis(300)))
        .unwrap();
    q.submit(&[Io {
        fua: false,
        tag: 0,
        op: Op::Read,
        offset: 0,
        len: 4096,
        buf: 0,
    }])
    .unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    let err = q.reap(1, &mut out).expect_err("reap must time out");
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "took {took:?}"
    );
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn killed_server_reads_as_disconnected() {
    let mut peer = nbdkit_memory("16M");
    let t = open(&peer.uri(""), &ClientOptions::default()).unwrap();
    let arena = Arc::new(Arena::new(8 * BS));
    let mut q = t
        .open_queue(&qcfg(8, &arena, Duration::from_secs(5)))
        .unwrap();
    q.submit(&[Io {
        fua: false,
        tag: 0,
        op: Op::Write,
        offset: 0,
        len: 4096,
        buf: 0,
    }])
    .unwrap();
    assert_eq!(wait_all(q.as_mut(), 1)[0].result, 0);
    peer.kill();
    let t0 = Instant::now();
    let ios: Vec<Io> = (0..8u32)
        .map(|i| Io {
            fua: false,
            tag: i,
            op: Op::Read,
            offset: i as u64 * 4096,
            len: 4096,
            buf: i as usize * BS,
        })
        .collect();
    let mut out = Vec::new();
    let err = q
        .submit(&ios)
        .and_then(|()| q.reap(8, &mut out))
        .expect_err("I/O to a killed server must fail");
    assert!(matches!(err, EngineError::Disconnected { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}

/// Keeps 32 writes and then 32 reads in flight, refilling as each completes, with new requests
/// held back to travel in fours (`submit_batch`): every byte reads back, every held request
/// is sent in the end, and the sends are fewer than the requests.
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn held_requests_all_go_out_and_data_verifies() {
    let peer = nbdkit_memory("64M");
    let opts = ClientOptions {
        submit_batch: 4,
        ..Default::default()
    };
    let t = open(&peer.uri(""), &opts).expect("open nbdkit");
    let depth = 32u32;
    let total = 1024usize;
    let arena = Arc::new(Arena::new(depth as usize * BS));
    let mut q = t
        .open_queue(&qcfg(depth, &arena, Duration::from_secs(10)))
        .expect("open queue");
    let block = |n: usize| (n as u64 * 7919 % total as u64) * BS as u64;
    for op in [Op::Write, Op::Read] {
        let mut next = 0usize;
        let mut slot_of = vec![0usize; depth as usize];
        let mut issue = |q: &mut dyn Queue, tag: u32, next: &mut usize| {
            let n = *next;
            *next += 1;
            slot_of[tag as usize] = n;
            let buf = tag as usize * BS;
            if op == Op::Write {
                // SAFETY (test): this region's previous I/O has completed.
                unsafe { arena.slice_mut(buf, BS) }.copy_from_slice(&pattern(BS, n as u64 + 7));
            }
            q.submit(&[Io {
                fua: false,
                tag,
                op,
                offset: block(n),
                len: BS as u32,
                buf,
            }])
            .unwrap();
            n
        };
        let mut issued = vec![0usize; depth as usize];
        for tag in 0..depth {
            issued[tag as usize] = issue(q.as_mut(), tag, &mut next);
        }
        let mut done = 0;
        let mut out = Vec::new();
        while done < total {
            out.clear();
            q.reap(1, &mut out).unwrap();
            for c in &out {
                assert_eq!(c.result, 0, "{op:?} {c:?}");
                let n = issued[c.tag as usize];
                if op == Op::Read {
                    // SAFETY (test): completed.
                    let got = unsafe { arena.slice(c.tag as usize * BS, BS) };
                    assert!(got == &pattern(BS, n as u64 + 7)[..], "block {n} differs");
                }
                done += 1;
                if next < total {
                    issued[c.tag as usize] = issue(q.as_mut(), c.tag, &mut next);
                }
            }
        }
    }
    let sends = q.stats()["nbd_send_calls"].as_u64().unwrap();
    assert!(
        sends < 2 * total as u64 * 3 / 4,
        "{sends} sends for {} requests",
        2 * total
    );
    q.close().unwrap();
}
