//! Zero-copy sends, fixed buffers and multishot receive into a buffer ring, against TCP
//! loopback pairs (AF_UNIX sockets take no zero-copy sends).

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    (a, b)
}

fn have(probe: fn() -> Result<(), String>) -> bool {
    match probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// Waits until `n` completions are taken (5 s at most).
fn take_n(r: &mut SockRing, n: usize) -> Vec<Cqe> {
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        r.enter(1, Some(Duration::from_millis(500))).unwrap();
        r.take(&mut got);
    }
    got
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_zero_copy_send_completes_then_notifies_and_counts_until_the_notification() {
    if !have(SockRing::probe_zc) {
        return;
    }
    let (a, mut b) = tcp_pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let data = pattern(256 * 1024);
    let mut fixed = pattern(64 * 1024);
    let iov = [libc::iovec {
        iov_base: fixed.as_mut_ptr().cast(),
        iov_len: fixed.len(),
    }];
    // SAFETY: `fixed` outlives the ring (dropped at the end of the test, after `r`).
    unsafe { r.register_buffers(&iov).unwrap() };
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; 256 * 1024 + 64 * 1024];
        b.read_exact(&mut got).unwrap();
        got
    });
    // SAFETY: both buffers stay untouched until the notifications are taken below.
    unsafe {
        r.send_zc(
            0,
            data.as_ptr(),
            data.len() as u32,
            libc::MSG_WAITALL,
            None,
            7,
        )
        .unwrap();
        r.send_zc(
            0,
            fixed.as_ptr(),
            fixed.len() as u32,
            libc::MSG_WAITALL,
            Some(0),
            8,
        )
        .unwrap();
    }
    let got = take_n(&mut r, 4);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(r.in_flight(), 0);
    for ud in [7, 8] {
        let mine: Vec<_> = got.iter().filter(|c| c.user_data == ud).collect();
        assert_eq!(mine.len(), 2, "{got:?}");
        // The result comes first, flagged MORE; the notification after it ends the send.
        assert!(mine[0].more() && !mine[0].notif(), "{mine:?}");
        assert!(mine[1].notif() && !mine[1].more(), "{mine:?}");
    }
    assert_eq!(
        got.iter().find(|c| c.user_data == 7).unwrap().result,
        256 * 1024
    );
    assert_eq!(
        got.iter().find(|c| c.user_data == 8).unwrap().result,
        64 * 1024
    );
    let back = reader.join().unwrap();
    assert_eq!(&back[..256 * 1024], &data[..]);
    assert_eq!(&back[256 * 1024..], &fixed[..]);
}

#[test]
fn a_non_blocking_zero_copy_send_may_be_short_and_the_rest_follows() {
    if !have(SockRing::probe_zc) {
        return;
    }
    let (a, mut b) = tcp_pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let data = pattern(8 << 20);
    // SAFETY: `data` is untouched until each send's notification is taken.
    unsafe {
        r.send_zc(
            0,
            data.as_ptr(),
            data.len() as u32,
            libc::MSG_DONTWAIT,
            None,
            1,
        )
        .unwrap()
    };
    let got = take_n(&mut r, 1);
    let sent = got[0].result;
    // Nobody reads: the socket takes what its buffers hold, not 8 MiB.
    assert!(sent > 0 && (sent as usize) < data.len(), "{got:?}");
    assert!(got[0].more(), "{got:?}");
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; 8 << 20];
        b.read_exact(&mut got).unwrap();
        got
    });
    let rest = &data[sent as usize..];
    // SAFETY: as above.
    unsafe {
        r.send_zc(
            0,
            rest.as_ptr(),
            rest.len() as u32,
            libc::MSG_WAITALL,
            None,
            2,
        )
        .unwrap()
    };
    // The first send's notification, the second's result and notification, in any order
    // between sends but each send's result before its notification.
    let mut got = got[1..].to_vec();
    got.extend(take_n(&mut r, 3 - got.len()));
    assert_eq!(r.in_flight(), 0, "{got:?}");
    let second: Vec<_> = got.iter().filter(|c| c.user_data == 2).collect();
    assert_eq!(second[0].result as usize, rest.len(), "{got:?}");
    assert!(second[1].notif(), "{got:?}");
    assert!(got.iter().any(|c| c.user_data == 1 && c.notif()), "{got:?}");
    assert_eq!(reader.join().unwrap(), data);
}

#[test]
fn a_multishot_receive_ends_with_enobufs_when_the_ring_runs_dry_and_rearms() {
    if !have(SockRing::probe_multishot) {
        return;
    }
    let (a, mut b) = tcp_pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let mut br = BufRing::new(2, 64, 3).unwrap();
    r.register_buf_ring(&br).unwrap();
    let data = pattern(1000);
    b.write_all(&data).unwrap();
    let mut out = Vec::new();
    let mut rearms = 0;
    let mut armed = false;
    let mut held = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while out.len() < data.len() && Instant::now() < end {
        if !armed {
            for bid in held.drain(..) {
                br.recycle(bid);
            }
            // SAFETY: `br` is registered and outlives the ring's operations (drained below).
            unsafe { r.recv_multi(0, 3, 9).unwrap() };
            armed = true;
        }
        for c in take_n(&mut r, 1) {
            assert_eq!(c.user_data, 9);
            if let Some(bid) = c.buffer() {
                assert!(c.result > 0, "{c:?}");
                out.extend_from_slice(br.buf(bid, c.result as usize));
                held.push(bid);
            }
            if !c.more() {
                assert_eq!(c.result, -libc::ENOBUFS, "{c:?}");
                armed = false;
                rearms += 1;
            }
        }
    }
    assert_eq!(out, data);
    // Two 64-byte buffers for 1000 bytes: the ring ran dry several times.
    assert!(rearms >= 3, "{rearms}");
    assert!(r.drain(&[9], Duration::from_secs(2)));
    drop(r);
    drop(br);
}

#[test]
fn drain_waits_out_an_armed_multishot_and_a_blocked_zero_copy_send() {
    if !have(SockRing::probe_multishot) {
        return;
    }
    let (a, b) = tcp_pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let br = BufRing::new(4, 4096, 1).unwrap();
    r.register_buf_ring(&br).unwrap();
    let data = pattern(16 << 20);
    // SAFETY: the drain below completes both before `data` and `br` go.
    unsafe {
        r.recv_multi(0, 1, 1).unwrap();
        r.send_zc(
            0,
            data.as_ptr(),
            data.len() as u32,
            libc::MSG_WAITALL,
            None,
            2,
        )
        .unwrap();
    }
    // The peer reads nothing: the send blocks in the kernel with part of its pages queued.
    assert!(!r.enter(3, Some(Duration::from_millis(50))).unwrap());
    assert!(r.in_flight() >= 2);
    // The queued pages are only released when the connection goes: drain cancels, and the
    // peer's close frees the socket's queue so the notification comes.
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(b);
    });
    assert!(r.drain(&[1, 2], Duration::from_secs(5)));
    assert_eq!(r.in_flight(), 0);
    closer.join().unwrap();
    drop(r);
    drop(br);
}
