//! Hostile and broken clients against our server: each gets the right NBD error or is
//! disconnected, and a well-behaved client on another connection keeps working throughout.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use common::{pattern, OurServer};
use sanbench_io::{Arena, Io, Op, Queue, QueueConfig};
use sanbench_nbd::wire::handshake::*;
use sanbench_nbd::wire::transmission::{cmd, cmd_flags, ReplyHeader, Request};
use sanbench_nbd::wire::{errno, Parsed, IHAVEOPT};
use sanbench_nbd::{open, ClientOptions, ServerConfig};

const SIZE: u64 = 8 << 20;

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut g = [0u8; 18];
    (&s).read_exact(&mut g).unwrap();
    assert!(matches!(Greeting::decode(&g), Ok(Parsed::Done { .. })));
    s
}

/// True when the server closed the connection (EOF or reset) within the timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// Handshake with simple replies; returns a stream in transmission.
fn transmission(addr: SocketAddr) -> TcpStream {
    let mut s = connect(addr);
    let mut out = Vec::new();
    encode_client_flags(cflags::FIXED_NEWSTYLE | cflags::NO_ZEROES, &mut out);
    ClientOption::ExportName(String::new()).encode(&mut out);
    s.write_all(&out).unwrap();
    let mut r = [0u8; 10];
    s.read_exact(&mut r).unwrap();
    let (rep, _) = ExportNameReply::decode(&r, true).unwrap().done().unwrap();
    assert_eq!(rep.size, SIZE);
    s
}

fn request(s: &mut TcpStream, cmd: u16, flags: u16, offset: u64, len: u32) -> u32 {
    let mut out = Vec::new();
    Request {
        flags,
        cmd,
        cookie: 77,
        offset,
        len,
    }
    .encode(&mut out);
    if cmd == cmd::WRITE {
        out.resize(out.len() + len as usize, 0xab);
    }
    s.write_all(&out).unwrap();
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    match ReplyHeader::decode(&h).unwrap().done().unwrap().0 {
        ReplyHeader::Simple { error, cookie } => {
            assert_eq!(cookie, 77);
            if error == 0 && cmd == cmd::READ {
                let mut d = vec![0u8; len as usize];
                s.read_exact(&mut d).unwrap();
            }
            error
        }
        h => panic!("unexpected {h:?}"),
    }
}

/// A good client doing verified I/O on its own connection.
struct Good {
    q: Box<dyn Queue>,
    arena: Arc<Arena>,
    round: u64,
}

impl Good {
    fn new(addr: SocketAddr) -> Good {
        let t = open(&format!("nbd://{addr}/"), &ClientOptions::default()).unwrap();
        let arena = Arc::new(Arena::new(1 << 16));
        let q = t
            .open_queue(&QueueConfig {
                worker: 0,
                depth: 2,
                max_len: 8192,
                arena: arena.clone(),
                io_timeout: Duration::from_secs(5),
                socket_ring: None,
            })
            .unwrap();
        Good { q, arena, round: 0 }
    }

    fn check(&mut self) {
        self.round += 1;
        let data = pattern(8192, self.round);
        unsafe { self.arena.slice_mut(0, 8192) }.copy_from_slice(&data);
        let off = self.round * 8192 % (SIZE - 8192);
        self.q
            .submit(&[Io {
                fua: false,
                tag: 0,
                op: Op::Write,
                offset: off,
                len: 8192,
                buf: 0,
            }])
            .unwrap();
        let mut out = Vec::new();
        self.q.reap(1, &mut out).unwrap();
        self.q
            .submit(&[Io {
                fua: false,
                tag: 1,
                op: Op::Read,
                offset: off,
                len: 8192,
                buf: 16384,
            }])
            .unwrap();
        self.q.reap(1, &mut out).unwrap();
        assert!(out.iter().all(|c| c.result == 0), "{out:?}");
        assert!(unsafe { self.arena.slice(16384, 8192) } == &data[..]);
    }
}

#[test]
fn hostile_clients_are_refused_and_others_keep_working() {
    let srv = OurServer::ram(SIZE, "");
    let mut good = Good::new(srv.addr);
    good.check();

    // Garbage instead of client flags: disconnected.
    let mut s = connect(srv.addr);
    s.write_all(b"\xff\xff\xff\xffGET / HTTP/1.0\r\n\r\n")
        .unwrap();
    assert!(closed(&mut s), "garbage client flags");
    good.check();

    // Garbage instead of an option: disconnected.
    let mut s = connect(srv.addr);
    s.write_all(&[0, 0, 0, 1]).unwrap();
    s.write_all(&[0x55; 64]).unwrap();
    assert!(closed(&mut s), "garbage option");
    good.check();

    // Oversized option length: NBD_REP_ERR_TOO_BIG, then disconnected.
    let mut s = connect(srv.addr);
    let mut out = vec![0, 0, 0, 1];
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&opt::GO.to_be_bytes());
    out.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
    s.write_all(&out).unwrap();
    let mut r = [0u8; 20];
    s.read_exact(&mut r).unwrap();
    let mut all = r.to_vec();
    let len = u32::from_be_bytes(r[16..20].try_into().unwrap()) as usize;
    let mut msg = vec![0u8; len];
    s.read_exact(&mut msg).unwrap();
    all.extend_from_slice(&msg);
    let (reply, _) = OptionReply::decode(&all).unwrap().done().unwrap();
    assert!(
        matches!(
            reply.body,
            ReplyBody::Error {
                code: rep::ERR_TOO_BIG,
                ..
            }
        ),
        "{reply:?}"
    );
    assert!(closed(&mut s), "oversized option");
    good.check();

    // Unknown option and unknown export: errors, connection goes on.
    let mut s = connect(srv.addr);
    let mut out = vec![0, 0, 0, 1];
    ClientOption::Other {
        option: 4242,
        data: vec![1, 2, 3],
    }
    .encode(&mut out);
    ClientOption::Go(GoRequest {
        name: "nope".into(),
        requests: vec![],
    })
    .encode(&mut out);
    ClientOption::Abort.encode(&mut out);
    s.write_all(&out).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let (r1, n1) = OptionReply::decode(&buf).unwrap().done().unwrap();
    let (r2, n2) = OptionReply::decode(&buf[n1..]).unwrap().done().unwrap();
    let (r3, _) = OptionReply::decode(&buf[n1 + n2..])
        .unwrap()
        .done()
        .unwrap();
    assert!(
        matches!(
            r1.body,
            ReplyBody::Error {
                code: rep::ERR_UNSUP,
                ..
            }
        ),
        "{r1:?}"
    );
    assert!(
        matches!(
            r2.body,
            ReplyBody::Error {
                code: rep::ERR_UNKNOWN,
                ..
            }
        ),
        "{r2:?}"
    );
    assert_eq!(r3.body, ReplyBody::Ack);
    good.check();

    // Transmission-phase mistakes get errors, and the connection stays usable.
    let mut s = transmission(srv.addr);
    assert_eq!(
        request(&mut s, cmd::READ, 0, SIZE - 512, 1024),
        errno::EINVAL
    );
    assert_eq!(
        request(&mut s, cmd::WRITE, 0, SIZE - 512, 1024),
        errno::ENOSPC
    );
    assert_eq!(
        request(&mut s, cmd::WRITE_ZEROES, 0, u64::MAX - 10, 100),
        errno::ENOSPC
    );
    assert_eq!(request(&mut s, cmd::TRIM, 0, SIZE, 1), errno::EINVAL);
    assert_eq!(request(&mut s, cmd::READ, 0, 0, u32::MAX), errno::EOVERFLOW);
    assert_eq!(request(&mut s, 99, 0, 0, 0), errno::EINVAL);
    assert_eq!(
        request(&mut s, cmd::READ, cmd_flags::NO_HOLE, 0, 512),
        errno::EINVAL
    );
    assert_eq!(request(&mut s, cmd::READ, 1 << 9, 0, 512), errno::EINVAL);
    assert_eq!(request(&mut s, cmd::READ, 0, 0, 512), 0);
    assert_eq!(request(&mut s, cmd::WRITE, cmd_flags::FUA, 512, 512), 0);
    assert_eq!(request(&mut s, cmd::FLUSH, 0, 0, 0), 0);
    good.check();

    // A WRITE announcing a huge payload is cut off.
    let mut out = Vec::new();
    Request {
        flags: 0,
        cmd: cmd::WRITE,
        cookie: 1,
        offset: 0,
        len: u32::MAX,
    }
    .encode(&mut out);
    s.write_all(&out).unwrap();
    assert!(closed(&mut s), "huge write");
    good.check();

    // Bad request magic: cut off.
    let mut s = transmission(srv.addr);
    s.write_all(&[0x42; 28]).unwrap();
    assert!(closed(&mut s), "bad request magic");
    good.check();

    // A client that vanishes mid-payload does not disturb anyone.
    let mut s = transmission(srv.addr);
    let mut out = Vec::new();
    Request {
        flags: 0,
        cmd: cmd::WRITE,
        cookie: 1,
        offset: 0,
        len: 65536,
    }
    .encode(&mut out);
    out.extend_from_slice(&[1; 1000]);
    s.write_all(&out).unwrap();
    drop(s);
    good.check();
    assert!(srv.stats.failed.load(std::sync::atomic::Ordering::Relaxed) >= 4);
}

#[test]
fn read_only_export_refuses_writes() {
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), SIZE);
    cfg.read_only = true;
    let srv = OurServer::start(cfg);
    let mut s = transmission(srv.addr);
    assert_eq!(request(&mut s, cmd::WRITE, 0, 0, 512), errno::EPERM);
    assert_eq!(request(&mut s, cmd::TRIM, 0, 0, 512), errno::EPERM);
    assert_eq!(request(&mut s, cmd::READ, 0, 0, 512), 0);
    let t = open(&format!("nbd://{}/", srv.addr), &ClientOptions::default()).unwrap();
    assert!(t.info().read_only);
}

#[test]
fn alignment_is_enforced_when_advertised() {
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), SIZE);
    cfg.min_block = 512;
    let srv = OurServer::start(cfg);
    let t = open(&format!("nbd://{}/", srv.addr), &ClientOptions::default()).unwrap();
    assert_eq!(t.info().block_size, 512);
    let mut s = transmission(srv.addr);
    assert_eq!(request(&mut s, cmd::READ, 0, 100, 512), errno::EINVAL);
    assert_eq!(request(&mut s, cmd::READ, 0, 512, 100), errno::EINVAL);
    assert_eq!(request(&mut s, cmd::READ, 0, 512, 1024), 0);
}

#[test]
fn file_backed_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.img");
    std::fs::File::create(&path).unwrap().set_len(SIZE).unwrap();
    let mut cfg = ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 0);
    cfg.file = Some(path.clone());
    let srv = OurServer::start(cfg);
    let mut good = Good::new(srv.addr);
    good.check();
    good.check();
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len() as u64, SIZE);
    assert!(on_disk[16384..16384 + 8192] == pattern(8192, 2)[..]);
}
