//! Measures the io_uring socket features one by one on loopback, with `SockRing` driven
//! directly (scripts/bench_ringfeat.py runs it, counts and prints ratios):
//!
//! * `write`: a 16-byte header and `size` bytes of payload per op, the 16-byte reply waited
//!   for, at queue depth 1 (an NBD WRITE's round trip). Send modes: `msg` (SENDMSG of two
//!   iovecs, as NBD sends today), `msgzc` (SENDMSG_ZC of the same), `zc` (SEND_ZC of one
//!   contiguous buffer), `zcfixed` (the same buffer registered, IORING_RECVSEND_FIXED_BUF).
//!   A zero-copy op is done at its notification.
//! * `read`: `qd` 16-byte requests in one SENDMSG, answered by `qd` replies of a 16-byte
//!   header and `size` bytes (a batch of READs). Receive modes: `single` (one RECV at a
//!   time into a 256 KiB receive buffer, as the initiators do), `multi` (one multishot RECV
//!   armed into a provided buffer ring, each buffer copied into the receive buffer and
//!   recycled: what a PDU parser reading its own buffer needs), `multinocopy` (the same
//!   without the copy: the bound for a parser that reads the kernel's buffers in place).
//!
//! `ringfeat serve` answers on 127.0.0.1 (port on stdout); `ringfeat run ADDR write|read
//! MODE SIZE QD OPS` prints one JSON line: ops, wall and CPU (getrusage: the client
//! process's user and system time), io_uring_enter calls.

use std::io::{self, BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use sanbench_io::sockring::{BufRing, Cqe, SockRing};

const HDR: usize = 16;
const RBUF: usize = 256 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("serve") => serve(),
        Some("run") if args.len() == 7 => run(&args[1..]),
        _ => Err(io::Error::other(
            "usage: ringfeat serve | ringfeat run ADDR write|read MODE SIZE QD OPS",
        )),
    };
    if let Err(e) = r {
        eprintln!("ringfeat: {e}");
        std::process::exit(2);
    }
}

fn serve() -> io::Result<()> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    println!("{}", l.local_addr()?);
    io::stdout().flush()?;
    for s in l.incoming() {
        let s = s?;
        std::thread::spawn(move || {
            let _ = answer(s);
        });
    }
    Ok(())
}

/// Header: op (1 write, 2 read), payload length.
fn answer(s: TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut w = s.try_clone()?;
    let mut r = io::BufReader::with_capacity(1 << 20, s);
    let mut hdr = [0u8; HDR];
    let mut sink = vec![0u8; 1 << 20];
    let mut out = Vec::new();
    loop {
        if r.fill_buf()?.is_empty() {
            return Ok(());
        }
        // Every request buffered now is answered with one write.
        out.clear();
        loop {
            r.read_exact(&mut hdr)?;
            let len = u32::from_le_bytes(hdr[4..8].try_into().unwrap()) as usize;
            match hdr[0] {
                1 => {
                    let mut left = len;
                    while left > 0 {
                        let n = left.min(sink.len());
                        r.read_exact(&mut sink[..n])?;
                        left -= n;
                    }
                    out.extend_from_slice(&hdr);
                }
                _ => {
                    out.extend_from_slice(&hdr);
                    out.resize(out.len() + len, 0x5a);
                }
            }
            if r.buffer().is_empty() {
                break;
            }
        }
        w.write_all(&out)?;
    }
}

struct Client {
    ring: SockRing,
    cqes: Vec<Cqe>,
}

impl Client {
    /// Waits for completions until `done` says the op is over.
    fn wait(&mut self, mut done: impl FnMut(&Cqe) -> bool) -> io::Result<()> {
        loop {
            self.ring.enter(1, Some(Duration::from_secs(10)))?;
            self.ring.take(&mut self.cqes);
            let mut over = false;
            for c in self.cqes.drain(..) {
                over |= done(&c);
            }
            if over {
                return Ok(());
            }
        }
    }
}

fn run(a: &[String]) -> io::Result<()> {
    let num = |s: &str| -> io::Result<usize> {
        s.parse()
            .map_err(|_| io::Error::other(format!("not a number: {s}")))
    };
    let (kind, mode) = (a[1].as_str(), a[2].as_str());
    let (size, qd, ops) = (num(&a[3])?, num(&a[4])?.max(1), num(&a[5])?);
    let s = TcpStream::connect(&a[0])?;
    s.set_nodelay(true)?;
    let ring = SockRing::open(&[s.as_raw_fd()], 64).map_err(io::Error::other)?;
    let mut c = Client {
        ring,
        cqes: Vec::new(),
    };
    let t0 = Instant::now();
    let cpu0 = cpu();
    let copied = match kind {
        "write" => writes(&mut c, mode, size, ops)?,
        "read" => reads(&mut c, mode, size, qd, ops).map(|()| 0)?,
        _ => return Err(io::Error::other(format!("unknown kind {kind}"))),
    };
    let wall = t0.elapsed().as_secs_f64();
    let (u, k) = cpu();
    println!(
        "{{\"kind\":\"{kind}\",\"mode\":\"{mode}\",\"size\":{size},\"qd\":{qd},\"ops\":{ops},\
         \"wall_s\":{wall:.6},\"user_s\":{:.6},\"sys_s\":{:.6},\"enters\":{},\"zc_copied\":{copied}}}",
        u - cpu0.0,
        k - cpu0.1,
        c.ring.enters()
    );
    Ok(())
}

/// Returns how many zero-copy notifications said the kernel copied after all.
fn writes(c: &mut Client, mode: &str, size: usize, ops: usize) -> io::Result<u64> {
    let mut buf = vec![0xa5u8; HDR + size];
    buf[0] = 1;
    buf[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    let mut reply = [0u8; HDR];
    let mut iov = [
        libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: HDR,
        },
        libc::iovec {
            // SAFETY: HDR < buf.len().
            iov_base: unsafe { buf.as_mut_ptr().add(HDR) }.cast(),
            iov_len: size,
        },
    ];
    // SAFETY: an all-zero msghdr is valid; it names `iov`, which outlives every send.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = 2;
    if mode == "zcfixed" {
        let reg = [libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        }];
        // SAFETY: `buf` outlives the ring's use of it (every op is waited out below).
        unsafe { c.ring.register_buffers(&reg)? };
    }
    let mut copied = 0u64;
    for _ in 0..ops {
        // SAFETY: `buf`, `iov`, `msg` and `reply` stay untouched until the op's completions
        // (the notification for zero-copy) are taken below.
        unsafe {
            match mode {
                "msg" => c.ring.send_msg(0, &msg, libc::MSG_WAITALL, 1)?,
                "msgzc" => c.ring.send_msg_zc(0, &msg, libc::MSG_WAITALL, 1)?,
                "zc" | "zcfixed" => c.ring.send_zc(
                    0,
                    buf.as_ptr(),
                    buf.len() as u32,
                    libc::MSG_WAITALL,
                    (mode == "zcfixed").then_some(0),
                    1,
                )?,
                _ => return Err(io::Error::other(format!("unknown send mode {mode}"))),
            }
            c.ring
                .recv(0, reply.as_mut_ptr(), HDR as u32, 2)
                .map(|_| ())?;
        }
        let (mut sent, mut got) = (false, 0usize);
        let mut err = None;
        c.wait(|q| {
            copied += u64::from(q.zc_copied());
            match q.user_data {
                1 if q.result < 0 && !q.notif() => err = Some(q.result),
                1 if !q.more() => sent = true,
                2 if q.result <= 0 => err = Some(q.result),
                2 => got += q.result as usize,
                _ => {}
            }
            err.is_some() || (sent && got > 0)
        })?;
        if let Some(e) = err {
            return Err(io::Error::other(format!("completion {e}")));
        }
        // A short reply (never seen on loopback) is read to its end.
        while got < HDR {
            // SAFETY: as above.
            unsafe {
                c.ring
                    .recv(0, reply[got..].as_mut_ptr(), (HDR - got) as u32, 2)?
            };
            c.wait(|q| {
                got += q.result.max(0) as usize;
                true
            })?;
        }
    }
    Ok(copied)
}

fn reads(c: &mut Client, mode: &str, size: usize, qd: usize, ops: usize) -> io::Result<()> {
    let mut reqs = vec![0u8; HDR * qd];
    for r in reqs.chunks_mut(HDR) {
        r[0] = 2;
        r[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    }
    let mut iov = libc::iovec {
        iov_base: reqs.as_mut_ptr().cast(),
        iov_len: reqs.len(),
    };
    // SAFETY: an all-zero msghdr is valid; it names `iov`, which outlives every send.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let mut rbuf = vec![0u8; RBUF];
    let multi = mode.starts_with("multi");
    let copy = mode == "multi";
    // 64 buffers of 32 KiB by default (RINGFEAT_BUF sets the size): a 4 KiB QD 32 batch
    // (131 KiB) or a 1 MiB reply in flight.
    let bsize = std::env::var("RINGFEAT_BUF")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32 * 1024)
        .min(RBUF);
    let mut br = if multi {
        let br = BufRing::new(64, bsize, 0)?;
        c.ring.register_buf_ring(&br)?;
        Some(br)
    } else if mode != "single" {
        return Err(io::Error::other(format!("unknown receive mode {mode}")));
    } else {
        None
    };
    let mut armed = false;
    let per_batch = qd * (HDR + size);
    let mut batches = ops.div_ceil(qd);
    let mut sum = 0u64;
    while batches > 0 {
        batches -= 1;
        // SAFETY: `msg` and `reqs` outlive the send, whose completion is taken below.
        unsafe { c.ring.send_msg(0, &msg, libc::MSG_WAITALL, 1)? };
        let mut got = 0;
        let mut sent = false;
        // A RECV in the kernel (single mode): one at a time, as the initiators do.
        let mut posted = false;
        while got < per_batch || !sent {
            if let Some(br) = &br {
                if !armed {
                    // SAFETY: `br` is registered and outlives the ring (drained below).
                    unsafe { c.ring.recv_multi(0, br.bgid(), 2)? };
                    armed = true;
                }
            } else if got < per_batch && !posted {
                posted = true;
                let at = got % RBUF;
                let room = (RBUF - at).min(per_batch - got);
                // SAFETY: `rbuf` is read only after this receive completes.
                unsafe { c.ring.recv(0, rbuf[at..].as_mut_ptr(), room as u32, 2)? };
            }
            let mut err = None;
            let mut more = Vec::new();
            c.wait(|q| {
                match q.user_data {
                    1 => sent = true,
                    2 => more.push(*q),
                    _ => {}
                }
                true
            })?;
            for q in more {
                posted = false;
                if !q.more() {
                    armed = false;
                }
                if q.result == -libc::ENOBUFS {
                    continue;
                }
                if q.result <= 0 {
                    err = Some(q.result);
                    continue;
                }
                let n = q.result as usize;
                if let (Some(br), Some(bid)) = (&mut br, q.buffer()) {
                    let data = br.buf(bid, n);
                    if copy {
                        let at = got % RBUF;
                        let k = n.min(RBUF - at);
                        rbuf[at..at + k].copy_from_slice(&data[..k]);
                        rbuf[..n - k].copy_from_slice(&data[k..]);
                    } else {
                        sum += u64::from(data[0]);
                    }
                    br.recycle(bid);
                }
                got += n;
            }
            if let Some(e) = err {
                return Err(io::Error::other(format!("receive: {e}")));
            }
        }
        sum += u64::from(rbuf[0]);
    }
    std::hint::black_box(sum);
    if multi && !c.ring.drain(&[2], Duration::from_secs(5)) {
        std::mem::forget(br);
    }
    Ok(())
}

/// This process's user and system CPU seconds (getrusage: what /proc/PID/stat's utime and
/// stime hold, at microsecond resolution).
fn cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}
