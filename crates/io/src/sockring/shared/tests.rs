//! Several connections on one SharedRing, over socket pairs: mailboxes, waits that count only
//! their own completions, detach with operations in flight, attach from another thread.

use super::*;
use crate::sockring::{Done, RingConn};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

fn usable() -> bool {
    let ok = SockRing::probe().is_ok();
    if !ok {
        eprintln!("skipped: no io_uring here");
    }
    ok
}

/// A connection on `ring` with a receive of up to 16 bytes posted into `buf`.
fn conn_receiving(ring: &SharedRing, s: &UnixStream, buf: &mut [u8; 16]) -> RingConn {
    let mut c = RingConn::open_on(s.as_raw_fd(), Some(ring)).unwrap();
    assert!(c.shared());
    // SAFETY: every caller keeps `buf` alive until the receive completed or was drained.
    unsafe { c.recv(buf.as_mut_ptr(), buf.len()).unwrap() };
    c
}

fn received(c: &mut RingConn) -> Vec<i32> {
    let mut out = Vec::new();
    c.take(&mut out);
    out.into_iter()
        .filter_map(|d| match d {
            Done::Received(n) => Some(n),
            Done::Sent(_) => None,
        })
        .collect()
}

#[test]
fn each_connection_sees_only_its_own_completions() {
    if !usable() {
        return;
    }
    let ring = SharedRing::new();
    assert_eq!(ring.fd(), None, "opened on the first attach only");
    let (a, mut pa) = UnixStream::pair().unwrap();
    let (b, mut pb) = UnixStream::pair().unwrap();
    let (mut ba, mut bb) = ([0u8; 16], [0u8; 16]);
    let mut ca = conn_receiving(&ring, &a, &mut ba);
    let mut cb = conn_receiving(&ring, &b, &mut bb);
    assert_eq!(ring.attached(), 2);
    assert!(ring.fd().is_some());
    assert_eq!(ca.fd().as_raw_fd(), cb.fd().as_raw_fd(), "one ring");
    // Nothing is submitted until a wait: the second connection's wait submits both receives.
    pb.write_all(b"for b").unwrap();
    assert!(cb.wait_recv(Duration::from_secs(5)).unwrap());
    assert_eq!(received(&mut cb), vec![5]);
    assert_eq!(&bb[..5], b"for b");
    // a's receive is in the kernel and b's completion did not satisfy a wait for a's.
    assert!(!ca.wait_recv(Duration::from_millis(30)).unwrap());
    assert!(received(&mut ca).is_empty());
    // Interleaved: a's data arrives while b waits; b's wait moves it to a's mailbox.
    // SAFETY: bb outlives the receive (taken or drained below).
    unsafe { cb.recv(bb.as_mut_ptr(), 16).unwrap() };
    pa.write_all(b"to a").unwrap();
    assert!(!cb.wait_recv(Duration::from_millis(200)).unwrap());
    assert!(ca.needs_enter(), "a's completion waits in its mailbox");
    assert!(
        ca.wait_recv(Duration::from_secs(5)).unwrap(),
        "no system call needed"
    );
    assert_eq!(received(&mut ca), vec![4]);
    assert_eq!(&ba[..4], b"to a");
    assert!(!ca.needs_enter());
    // The stream's one wait takes b's next reply into b's mailbox.
    pb.write_all(b"bb").unwrap();
    assert!(ring.wait(Duration::from_secs(5)).unwrap());
    assert!(cb.needs_enter() && !ca.needs_enter());
    assert_eq!(received(&mut cb), vec![2]);
    // A send and the peer's echo, on a while b's receive sits in the kernel.
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 3];
        pa.read_exact(&mut buf).unwrap();
        pa.write_all(&buf).unwrap();
        pa
    });
    let msg = *b"xyz";
    // SAFETY: msg and ba outlive the wait, which takes both completions.
    unsafe {
        ca.send([(msg.as_ptr(), 3)], 0).unwrap();
        ca.recv(ba.as_mut_ptr(), 16).unwrap();
    }
    let mut got = Vec::new();
    let mut bytes = 0;
    while bytes < 3 {
        ca.wait_recv(Duration::from_secs(5)).unwrap();
        ca.take(&mut got);
        for d in got.drain(..) {
            if let Done::Received(n) = d {
                assert!(n > 0);
                bytes += n;
            }
        }
    }
    assert!(!ca.sending());
    assert_eq!(&ba[..3], b"xyz");
    let _pa = echo.join().unwrap();
    assert!(ca.drain() && cb.drain());
    drop((ca, cb));
    assert_eq!(ring.attached(), 0);
}

#[test]
fn a_detach_drains_its_own_and_keeps_the_others_completions() {
    if !usable() {
        return;
    }
    let ring = SharedRing::new();
    let (a, _pa) = UnixStream::pair().unwrap();
    let (b, mut pb) = UnixStream::pair().unwrap();
    let (mut ba, mut bb) = ([0u8; 16], [0u8; 16]);
    let mut ca = conn_receiving(&ring, &a, &mut ba);
    let mut cb = conn_receiving(&ring, &b, &mut bb);
    // Both receives in the kernel; b's completes and waits in the ring, uncollected.
    ring.wait(Duration::ZERO).unwrap();
    pb.write_all(b"kept").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // a goes (a failed path): its receive is cancelled and waited out.
    assert!(ca.drain());
    assert!(!ca.receiving());
    drop(ca);
    assert_eq!(ring.attached(), 1);
    // b's completion was not lost by a's drain.
    assert!(cb.wait_recv(Duration::from_secs(5)).unwrap());
    assert_eq!(received(&mut cb), vec![4]);
    assert_eq!(&bb[..4], b"kept");
    // b keeps working, and a new connection takes the freed slot.
    let (c, mut pc) = UnixStream::pair().unwrap();
    let mut bc = [0u8; 16];
    let mut cc = conn_receiving(&ring, &c, &mut bc);
    // SAFETY: bb outlives the receive.
    unsafe { cb.recv(bb.as_mut_ptr(), 16).unwrap() };
    pc.write_all(b"c").unwrap();
    pb.write_all(b"bbb").unwrap();
    assert!(cc.wait_recv(Duration::from_secs(5)).unwrap());
    assert!(cb.wait_recv(Duration::from_secs(5)).unwrap());
    assert_eq!(received(&mut cc), vec![1]);
    assert_eq!(received(&mut cb), vec![3]);
    assert!(cb.drain() && cc.drain());
}

#[test]
fn a_dropped_attachment_with_a_receive_in_flight_detaches_itself() {
    if !usable() {
        return;
    }
    let ring = SharedRing::new();
    let (a, _pa) = UnixStream::pair().unwrap();
    let mut ba = [0u8; 16];
    let mut att = ring.attach(a.as_raw_fd()).unwrap();
    let e = opcode::Recv::new(io_uring::types::Fixed(att.file()), ba.as_mut_ptr(), 16)
        .build()
        .user_data(att.user_data(2));
    // SAFETY: the drop below waits the receive out before `ba` goes.
    unsafe { att.push(&e).unwrap() };
    ring.wait(Duration::ZERO).unwrap();
    drop(att);
    assert_eq!(ring.attached(), 0);
    assert!(ring.attach(a.as_raw_fd()).is_ok(), "the slot was freed");
}

#[test]
fn attach_from_another_thread_while_the_owner_waits() {
    if !usable() {
        return;
    }
    let ring = SharedRing::new();
    let (a, mut pa) = UnixStream::pair().unwrap();
    let mut ba = [0u8; 16];
    let mut ca = conn_receiving(&ring, &a, &mut ba);
    let (b, mut pb) = UnixStream::pair().unwrap();
    let other = ring.clone();
    // The owner waits up to 2 s for a; the attach (a reconnection) must not wait for it.
    let t = std::thread::spawn(move || {
        let started = Instant::now();
        let mut bb = Box::new([0u8; 16]);
        let mut cb = RingConn::open_on(b.as_raw_fd(), Some(&other)).unwrap();
        let took = started.elapsed();
        assert!(cb.shared());
        // SAFETY: bb lives until the drain below.
        unsafe { cb.recv(bb.as_mut_ptr(), 16).unwrap() };
        pa.write_all(b"go").unwrap();
        pb.write_all(b"hi").unwrap();
        (took, cb, bb, b)
    });
    let started = Instant::now();
    assert!(ca.wait_recv(Duration::from_secs(10)).unwrap());
    assert_eq!(received(&mut ca), vec![2]);
    let (took, mut cb, bb, _b) = t.join().unwrap();
    assert!(
        took < Duration::from_secs(2),
        "attach waited {took:?} for the owner's wait"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    // The other thread's receive is submitted by this thread's wait.
    assert!(cb.wait_recv(Duration::from_secs(5)).unwrap());
    assert_eq!(received(&mut cb), vec![2]);
    assert_eq!(&bb[..2], b"hi");
    assert!(ca.drain() && cb.drain());
}

#[test]
fn a_full_ring_leaves_a_connection_on_a_ring_of_its_own() {
    if !usable() {
        return;
    }
    let ring = SharedRing::new();
    let socks: Vec<_> = (0..SLOTS + 1)
        .map(|_| UnixStream::pair().unwrap())
        .collect();
    let conns: Vec<_> = socks
        .iter()
        .map(|(s, _)| RingConn::open_on(s.as_raw_fd(), Some(&ring)).unwrap())
        .collect();
    assert_eq!(conns.iter().filter(|c| c.shared()).count(), SLOTS);
    assert!(!conns[SLOTS].shared());
    assert_ne!(conns[SLOTS].fd().as_raw_fd(), ring.fd().unwrap());
}
