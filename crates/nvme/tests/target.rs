//! The target against the crate's own host, and against hand-crafted hostile PDUs: each bad
//! host gets its status or a C2HTermReq and is disconnected, while a good host next to it
//! keeps working.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sanbench_nvme::host::conn::{Connection, HostOptions};
use sanbench_nvme::host::session::{connect_admin, connect_io, connect_queue, exec, exec_ok};
use sanbench_nvme::host::HostError;
use sanbench_nvme::target::{Target, TargetConfig, TargetStats, DISCOVERY_NQN};
use sanbench_nvme::wire::cmd::{identify_sqe, io, rw_sqe, DataPtr, Rw};
use sanbench_nvme::wire::header::{pdu_type, zeroed, CommonHeader, IcReq};
use sanbench_nvme::wire::identify::{cns, decode_ns_list, IdNs};
use sanbench_nvme::wire::pdu::{encode_pdu, TxConfig};
use sanbench_nvme::wire::status::Status;
use sanbench_nvme::wire::{crc32c, fes};

const NQN: &str = "nqn.2026-11.io.sanbench:test";

struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start() -> Running {
    start_with(TargetConfig::default()).0
}

fn start_with(cfg: TargetConfig) -> (Running, Arc<TargetStats>) {
    let t = Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        nqn: NQN.into(),
        size: 64 << 20,
        ..cfg
    })
    .unwrap();
    let stats = t.stats();
    let addr = t.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = Some(std::thread::spawn(move || t.run(s).unwrap()));
    (Running { addr, stop, thread }, stats)
}

fn opts(hd: bool, dd: bool) -> HostOptions {
    HostOptions {
        header_digest: hd,
        data_digest: dd,
        timeout: Duration::from_secs(5),
        ..HostOptions::default()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn write(c: &mut Connection, cid: u16, lba: u64, data: &[u8]) -> Status {
    write_ns(c, 1, cid, lba, data)
}

fn write_ns(c: &mut Connection, nsid: u32, cid: u16, lba: u64, data: &[u8]) -> Status {
    let rw = Rw {
        nsid,
        slba: lba,
        nlb: (data.len() / 512) as u32,
        fua: false,
    };
    let s = rw_sqe(
        io::WRITE,
        cid,
        rw,
        DataPtr::Transport {
            len: data.len() as u32,
        },
    );
    Status::from_field(exec(c, s, data, &mut []).unwrap().status.get())
}

fn read(c: &mut Connection, cid: u16, lba: u64, len: usize) -> (Status, Vec<u8>) {
    read_ns(c, 1, cid, lba, len)
}

fn read_ns(c: &mut Connection, nsid: u32, cid: u16, lba: u64, len: usize) -> (Status, Vec<u8>) {
    let rw = Rw {
        nsid,
        slba: lba,
        nlb: (len / 512) as u32,
        fua: false,
    };
    let s = rw_sqe(io::READ, cid, rw, DataPtr::Transport { len: len as u32 });
    let mut b = vec![0u8; len];
    let q = exec(c, s, &[], &mut b).unwrap();
    (Status::from_field(q.status.get()), b)
}

#[test]
fn write_read_back_every_digest_setting() {
    let t = start();
    for (hd, dd) in [(false, false), (true, false), (false, true), (true, true)] {
        let o = opts(hd, dd);
        let a = connect_admin(t.addr, NQN, 1, 4, &o).unwrap();
        assert_eq!(a.ns.as_ref().unwrap().nsze, (64 << 20) / 512);
        assert_eq!(a.queues, 4);
        assert_eq!(a.id.subnqn, NQN);
        let mut q1 = connect_io(t.addr, NQN, &a, 1, 128, &o).unwrap();
        let mut q2 = connect_io(t.addr, NQN, &a, 2, 128, &o).unwrap();
        assert_eq!(q1.in_capsule, 8192);
        // SQ flow control off: reads complete with their last C2HData (SUCCESS flag).
        assert!(q1.sqflow_disabled && q2.sqflow_disabled);
        // In the capsule (4 KiB), on one R2T in pieces of MAXH2CDATA (1 MiB), and read back
        // on the other queue.
        let small = pattern(4096, 1);
        let big = pattern(1 << 20, 2 + hd as u8 + 2 * dd as u8);
        assert_eq!(write(&mut q1, 1, 8, &small), Status::SUCCESS);
        assert_eq!(write(&mut q1, 2, 4096, &big), Status::SUCCESS);
        assert_eq!(read(&mut q2, 1, 8, 4096), (Status::SUCCESS, small));
        assert_eq!(read(&mut q2, 2, 4096, 1 << 20), (Status::SUCCESS, big));
        // Past the end, and above MDTS.
        assert_eq!(
            read(&mut q2, 3, (64 << 20) / 512 - 1, 1024).0,
            Status::LBA_RANGE
        );
        assert_eq!(read(&mut q2, 4, 0, 2 << 20).0, Status::INVALID_FIELD);
    }
}

#[test]
fn several_namespaces_are_listed_and_kept_apart() {
    let (t, _) = start_with(TargetConfig {
        namespaces: 3,
        ..TargetConfig::default()
    });
    let o = opts(false, false);
    let mut a = connect_admin(t.addr, NQN, 3, 2, &o).unwrap();
    assert_eq!(a.id.nn, 3);
    assert_eq!(a.ns.as_ref().unwrap().nsze, (64 << 20) / 512);
    assert_eq!(a.ns.as_ref().unwrap().nuse, 0);
    let mut b = vec![0u8; 4096];
    let cid = a.next_cid();
    exec_ok(
        &mut a.conn,
        "Identify",
        identify_sqe(cid, cns::ACTIVE_NS_LIST, 0, 4096),
        &[],
        &mut b,
    )
    .unwrap();
    assert_eq!(decode_ns_list(&b), vec![1, 2, 3]);
    let cid = a.next_cid();
    exec_ok(
        &mut a.conn,
        "Identify",
        identify_sqe(cid, cns::ACTIVE_NS_LIST, 2, 4096),
        &[],
        &mut b,
    )
    .unwrap();
    assert_eq!(decode_ns_list(&b), vec![3]);
    let mut q = connect_io(t.addr, NQN, &a, 1, 32, &o).unwrap();
    // The same LBA of each namespace holds its own data; the last block of namespace 2 is
    // not the first of namespace 3.
    let last = (64 << 20) / 512 - 8;
    for ns in 1..=3u32 {
        assert_eq!(
            write_ns(&mut q, ns, 1, 0, &pattern(4096, ns as u8)),
            Status::SUCCESS
        );
        assert_eq!(
            write_ns(&mut q, ns, 2, last, &pattern(4096, 10 + ns as u8)),
            Status::SUCCESS
        );
    }
    for ns in 1..=3u32 {
        assert_eq!(
            read_ns(&mut q, ns, 3, 0, 4096),
            (Status::SUCCESS, pattern(4096, ns as u8))
        );
        assert_eq!(
            read_ns(&mut q, ns, 4, last, 4096),
            (Status::SUCCESS, pattern(4096, 10 + ns as u8))
        );
    }
    assert_eq!(read_ns(&mut q, 4, 5, 0, 4096).0, Status::INVALID_NS);
    assert_eq!(read_ns(&mut q, 0, 6, 0, 4096).0, Status::INVALID_NS);
    assert_eq!(read_ns(&mut q, 2, 7, last + 8, 512).0, Status::LBA_RANGE);
    // NUSE counts what each namespace holds (8 KiB written), not the whole store.
    let cid = a.next_cid();
    exec_ok(
        &mut a.conn,
        "Identify",
        identify_sqe(cid, cns::NAMESPACE, 2, 4096),
        &[],
        &mut b,
    )
    .unwrap();
    let ns2 = IdNs::decode(&b).unwrap();
    assert!(
        ns2.nuse > 0 && ns2.nuse < (64 << 20) / 512 / 2,
        "{}",
        ns2.nuse
    );
    assert!(connect_admin(t.addr, NQN, 4, 1, &o).is_err());
    assert!(Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        namespaces: 0,
        ..TargetConfig::default()
    })
    .is_err());
}

#[test]
fn discovery_log_names_the_subsystem() {
    let t = start();
    let mut a = connect_admin(t.addr, DISCOVERY_NQN, 0, 0, &opts(false, false)).unwrap();
    assert!(a.ns.is_none());
    let log = a.log_page(0x70, 2048).unwrap();
    assert_eq!(u64::from_le_bytes(log[8..16].try_into().unwrap()), 1);
    let e = &log[1024..];
    assert_eq!((e[0], e[2]), (3, 2));
    assert!(e[256..].starts_with(NQN.as_bytes()));
    assert!(e[32..].starts_with(t.addr.port().to_string().as_bytes()));
    a.keep_alive().unwrap();
    // A host asking for far more than the page holds gets the page, not a buffer its size.
    let big = a.log_page(0x70, 64 << 20).unwrap();
    assert_eq!(&big[..2048], &log[..]);
}

/// Reads until the target closes; returns the C2HTermReq's FES if one came first.
fn term_then_close(s: &mut TcpStream) -> Option<u16> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut all = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&b[..n]),
        }
    }
    // Skip an ICResp if there is one.
    let mut at = 0;
    while at + 8 <= all.len() {
        let plen = u32::from_le_bytes(all[at + 4..at + 8].try_into().unwrap()) as usize;
        if all[at] == pdu_type::C2H_TERM_REQ {
            return Some(u16::from_le_bytes([all[at + 8], all[at + 9]]));
        }
        at += plen.max(8);
    }
    None
}

fn icreq(digest: u8, pfv: u16) -> Vec<u8> {
    let mut r: IcReq = zeroed();
    r.ch = CommonHeader::new(pdu_type::IC_REQ);
    r.digest = digest;
    r.pfv.set(pfv);
    let mut b = Vec::new();
    encode_pdu(&mut b, &r, &[], &TxConfig::default());
    b
}

#[test]
fn hostile_hosts_are_cut_off_alone() {
    let t = start();
    // A good host, working throughout.
    let o = opts(true, true);
    let a = connect_admin(t.addr, NQN, 1, 2, &o).unwrap();
    let mut good = connect_io(t.addr, NQN, &a, 1, 32, &o).unwrap();
    let data = pattern(16384, 9);
    assert_eq!(write(&mut good, 1, 0, &data), Status::SUCCESS);

    // Bad ICReq: an unknown PDU format version.
    let mut s = TcpStream::connect(t.addr).unwrap();
    s.write_all(&icreq(0, 1)).unwrap();
    assert_eq!(term_then_close(&mut s), Some(fes::INVALID_HEADER_FIELD));

    // A command capsule before the ICReq.
    let mut s = TcpStream::connect(t.addr).unwrap();
    let mut b = Vec::new();
    let mut c: sanbench_nvme::wire::header::CapsuleCmd = zeroed();
    c.ch = CommonHeader::new(pdu_type::CAPSULE_CMD);
    encode_pdu(&mut b, &c, &[], &TxConfig::default());
    s.write_all(&b).unwrap();
    assert_eq!(term_then_close(&mut s), Some(fes::PDU_SEQUENCE_ERROR));

    // Oversized PDU: refused from its common header alone.
    let mut s = TcpStream::connect(t.addr).unwrap();
    s.write_all(&icreq(0, 0)).unwrap();
    let mut h = vec![pdu_type::CAPSULE_CMD, 0, 72, 72];
    h.extend_from_slice(&(1u32 << 30).to_le_bytes());
    s.write_all(&h).unwrap();
    assert_eq!(term_then_close(&mut s), Some(fes::INVALID_HEADER_FIELD));

    // Wrong header digest.
    let mut s = TcpStream::connect(t.addr).unwrap();
    s.write_all(&icreq(1, 0)).unwrap();
    let mut b = Vec::new();
    encode_pdu(
        &mut b,
        &c,
        &[],
        &TxConfig {
            header_digest: true,
            data_digest: false,
            pda: 0,
        },
    );
    let at = b.len() - 4;
    let bad = crc32c(&b[..72]) ^ 1;
    b[at..].copy_from_slice(&bad.to_le_bytes());
    s.write_all(&b).unwrap();
    assert_eq!(term_then_close(&mut s), Some(fes::HEADER_DIGEST_ERROR));

    // A command before Connect: a status, the connection stays.
    let mut c2 = Connection::open(t.addr, &opts(false, false)).unwrap();
    let rw = Rw {
        nsid: 1,
        slba: 0,
        nlb: 1,
        fua: false,
    };
    let mut b = vec![0u8; 512];
    let q = exec(
        &mut c2,
        rw_sqe(io::READ, 5, rw, DataPtr::Transport { len: 512 }),
        &[],
        &mut b,
    );
    assert_eq!(
        Status::from_field(q.unwrap().status.get()),
        Status::CMD_SEQ_ERROR
    );
    // Connect data must come in the capsule, not on an R2T.
    let e = connect_queue(&mut c2, &o_plain(), NQN, a.cntlid, 2, 32);
    assert!(
        matches!(
            e,
            Err(HostError::Status {
                status: Status::SGL_INVALID_DATA,
                ..
            })
        ),
        "{e:?}"
    );
    // Queue id out of range (the controller granted 2), and a queue connected twice.
    c2.in_capsule = 1024;
    let e = connect_queue(&mut c2, &o_plain(), NQN, a.cntlid, 3, 32);
    assert!(
        matches!(
            e,
            Err(HostError::Status {
                status: Status::CONNECT_INVALID_PARAM,
                ..
            })
        ),
        "{e:?}"
    );
    let mut c3 = Connection::open(t.addr, &opts(false, false)).unwrap();
    c3.in_capsule = 1024;
    let e = connect_queue(&mut c3, &o_plain(), NQN, a.cntlid, 1, 32);
    assert!(
        matches!(
            e,
            Err(HostError::Status {
                status: Status::CONNECT_INVALID_PARAM,
                ..
            })
        ),
        "{e:?}"
    );
    // A data digest that does not match: the connection ends.
    let mut s = TcpStream::connect(t.addr).unwrap();
    s.write_all(&icreq(2, 0)).unwrap();
    let mut b = Vec::new();
    encode_pdu(
        &mut b,
        &c,
        &[1, 2, 3, 4],
        &TxConfig {
            header_digest: false,
            data_digest: true,
            pda: 0,
        },
    );
    let n = b.len();
    b[n - 1] ^= 0xff;
    s.write_all(&b).unwrap();
    assert!(term_then_close(&mut s).is_some());

    // The good host never noticed.
    assert_eq!(read(&mut good, 2, 0, 16384), (Status::SUCCESS, data));
    drop(a);
}

fn o_plain() -> HostOptions {
    opts(false, false)
}

#[test]
fn admin_commands_need_ready_and_keep_alive_ends_a_silent_controller() {
    let t = start();
    let o = HostOptions {
        kato_ms: 300,
        ..opts(false, false)
    };
    let mut a = connect_admin(t.addr, NQN, 1, 1, &o).unwrap();
    a.keep_alive().unwrap();
    // Silent for longer than KATO plus the grace second: the controller goes away.
    std::thread::sleep(Duration::from_millis(1800));
    assert!(a.keep_alive().is_err());
    // An I/O queue to a controller that never enabled is refused.
    let mut c = Connection::open(t.addr, &o_plain()).unwrap();
    c.in_capsule = 1024;
    let cntlid = connect_queue(&mut c, &o_plain(), NQN, 0xffff, 0, 32).unwrap();
    let mut q = Connection::open(t.addr, &o_plain()).unwrap();
    q.in_capsule = 1024;
    let e = connect_queue(&mut q, &o_plain(), NQN, cntlid, 1, 32);
    assert!(
        matches!(
            e,
            Err(HostError::Status {
                status: Status::CMD_SEQ_ERROR,
                ..
            })
        ),
        "{e:?}"
    );
    let mut b = vec![0u8; 4096];
    let s = sanbench_nvme::wire::cmd::identify_sqe(9, 1, 0, 4096);
    let e = exec_ok(&mut c, "Identify", s, &[], &mut b);
    assert!(
        matches!(
            e,
            Err(HostError::Status {
                status: Status::CMD_SEQ_ERROR,
                ..
            })
        ),
        "{e:?}"
    );
}

#[test]
fn a_host_that_stops_reading_is_cut_off_alone() {
    let (t, stats) = start_with(TargetConfig {
        send_timeout: Duration::from_millis(500),
        ..TargetConfig::default()
    });
    let o = opts(false, false);
    let a = connect_admin(t.addr, NQN, 1, 2, &o).unwrap();
    let mut good = connect_io(t.addr, NQN, &a, 1, 32, &o).unwrap();
    let mut idle = connect_io(t.addr, NQN, &a, 2, 1024, &o).unwrap();
    // 512 reads of 1 MiB, never read back: far more than the socket buffers hold.
    for cid in 0..512u16 {
        let rw = Rw {
            nsid: 1,
            slba: 0,
            nlb: 2048,
            fua: false,
        };
        idle.send_cmd(
            rw_sqe(io::READ, cid, rw, DataPtr::Transport { len: 1 << 20 }),
            &[],
        );
    }
    idle.flush().unwrap();
    let t0 = std::time::Instant::now();
    while stats.failed.load(Ordering::Relaxed) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the stalled host was never cut off"
        );
        // The good host keeps working meanwhile.
        assert_eq!(read(&mut good, 1, 0, 4096).0, Status::SUCCESS);
        std::thread::sleep(Duration::from_millis(50));
    }
    let e = stats.last_error.lock().unwrap().clone().unwrap_or_default();
    assert!(
        e.contains("temporarily unavailable") || e.contains("timed out"),
        "{e}"
    );
    assert_eq!(read(&mut good, 2, 0, 4096).0, Status::SUCCESS);
}
