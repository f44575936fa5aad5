//! RingConn with zero-copy sends and the multishot receive, over TCP loopback.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    (a, b)
}

fn open(fd: std::os::fd::RawFd, asked: RingFeatures) -> Option<RingConn> {
    let (f, why) = asked.choose();
    if f != asked {
        eprintln!("skipped: {}", why.unwrap_or_default());
        return None;
    }
    Some(RingConn::open_with(fd, f).unwrap())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + i / 509) as u8).collect()
}

const ZC: RingFeatures = RingFeatures {
    send_zc: true,
    multishot: false,
};
const MULTI: RingFeatures = RingFeatures {
    send_zc: false,
    multishot: true,
};

#[test]
fn names_parse_back_and_a_missing_feature_is_dropped_with_the_reason() {
    for f in [
        RingFeatures::default(),
        ZC,
        MULTI,
        RingFeatures {
            send_zc: true,
            multishot: true,
        },
    ] {
        assert_eq!(RingFeatures::parse(&f.name()), Some(f));
    }
    assert_eq!(RingFeatures::parse("sendzc,bogus"), None);
    let both = RingFeatures::parse("sendzc, multishot").unwrap();
    let (f, why) = both.choose_with(|| Err("no IORING_OP_SEND_ZC".into()), || Ok(()));
    assert_eq!(f, MULTI);
    assert_eq!(why.unwrap(), "sendzc: no IORING_OP_SEND_ZC");
}

#[test]
fn a_large_send_goes_zero_copy_and_is_done_only_at_its_notification() {
    let (a, mut b) = tcp_pair();
    let Some(mut c) = open(a.as_raw_fd(), ZC) else {
        return;
    };
    let (h, data) = (*b"header!!", pattern(256 * 1024));
    // SAFETY: h and data stay untouched until the Done::Sent below.
    let total = unsafe { c.send([(h.as_ptr(), 8), (data.as_ptr(), data.len())], 0) }.unwrap();
    assert_eq!(total, 8 + data.len());
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; 8 + 256 * 1024];
        b.read_exact(&mut got).unwrap();
        got
    });
    let mut done = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while done.is_empty() && Instant::now() < end {
        // Until the notification the send is in the kernel, whatever completed before it.
        assert!(c.sending() && c.zero_copy_in_flight());
        c.enter(1, Duration::from_millis(200)).unwrap();
        c.take(&mut done);
    }
    assert_eq!(done, vec![Done::Sent(total as i32)]);
    assert!(!c.sending() && !c.zero_copy_in_flight());
    assert_eq!(
        c.own().unwrap().in_flight(),
        0,
        "the notification was taken"
    );
    let got = reader.join().unwrap();
    assert_eq!(&got[..8], &h);
    assert_eq!(&got[8..], &data[..]);
}

/// Receives `want` bytes through `c.recv` in pieces of at most `piece`.
fn recv_all(c: &mut RingConn, want: usize, piece: usize) -> Vec<u8> {
    let mut out = vec![0u8; want];
    let mut at = 0;
    let mut done = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while at < want && Instant::now() < end {
        if !c.receiving() {
            let n = piece.min(want - at);
            // SAFETY: out[at..at+n] is only read after the Done::Received.
            unsafe { c.recv(out[at..].as_mut_ptr(), n) }.unwrap();
        }
        c.wait_recv(Duration::from_millis(500)).unwrap();
        c.take(&mut done);
        for d in done.drain(..) {
            match d {
                Done::Received(n) => {
                    assert!(n > 0, "{n}");
                    at += n as usize;
                }
                Done::Sent(_) => {}
            }
        }
    }
    out
}

#[test]
fn the_multishot_receive_copies_in_order_and_rearms_after_the_ring_ran_dry() {
    let (a, mut b) = tcp_pair();
    let Some(mut c) = open(a.as_raw_fd(), MULTI) else {
        return;
    };
    // Arm it, then send more than the ring holds (64 x 32 KiB) while nobody asks: the
    // ring runs dry and the armed receive ends with ENOBUFS.
    let mut first = [0u8; 1];
    let data = pattern(5 << 20);
    let writer = {
        let data = data.clone();
        std::thread::spawn(move || b.write_all(&data).map(|()| b))
    };
    // SAFETY: `first` is read after its Done::Received.
    unsafe { c.recv(first.as_mut_ptr(), 1) }.unwrap();
    let mut done = Vec::new();
    while done.is_empty() {
        c.wait_recv(Duration::from_secs(5)).unwrap();
        c.take(&mut done);
    }
    assert_eq!(done, vec![Done::Received(1)]);
    std::thread::sleep(Duration::from_millis(200));
    let rest = recv_all(&mut c, data.len() - 1, 100_000);
    assert_eq!(first[0], data[0]);
    assert!(rest == data[1..], "bytes lost or out of order");
    let b = writer.join().unwrap().unwrap();
    // The end of the stream is a zero-byte receive, as on the plain path.
    drop(b);
    let mut x = [0u8; 4];
    // SAFETY: read after its completion.
    unsafe { c.recv(x.as_mut_ptr(), 4) }.unwrap();
    let mut done = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while done.is_empty() && Instant::now() < end {
        c.wait_recv(Duration::from_millis(500)).unwrap();
        c.take(&mut done);
    }
    assert_eq!(done, vec![Done::Received(0)]);
    assert!(c.drain());
}

#[test]
fn drain_waits_out_the_armed_receive_and_a_zero_copy_send() {
    let both = RingFeatures {
        send_zc: true,
        multishot: true,
    };
    let (a, b) = tcp_pair();
    let Some(mut c) = open(a.as_raw_fd(), both) else {
        return;
    };
    let data = pattern(16 << 20);
    let mut r = [0u8; 16];
    // SAFETY: the drain below returns before data and r go.
    unsafe {
        c.send([(data.as_ptr(), data.len())], libc::MSG_WAITALL)
            .unwrap();
        c.recv(r.as_mut_ptr(), 16).unwrap();
    }
    assert!(!c.wait_recv(Duration::from_millis(50)).unwrap());
    assert!(c.sending() && c.receiving());
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(b);
    });
    assert!(c.drain());
    assert!(!c.sending() && !c.receiving());
    assert_eq!(c.own().unwrap().in_flight(), 0);
    closer.join().unwrap();
}
