//! SockRing against socket pairs: submissions, waits, cancellation and drain.

use super::*;
use std::os::unix::net::UnixStream;

fn pair() -> (UnixStream, UnixStream) {
    UnixStream::pair().unwrap()
}

#[test]
fn layer_names_parse_back() {
    for l in [SocketLayer::Poll, SocketLayer::Uring] {
        assert_eq!(SocketLayer::parse(l.name()), Some(l));
    }
    assert_eq!(SocketLayer::parse("epoll"), None);
}

#[test]
fn send_and_receive_in_one_enter() {
    if SockRing::probe().is_err() {
        eprintln!("skipped: no io_uring here");
        return;
    }
    let (a, b) = pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    // The peer answers whatever arrives with the same bytes.
    let echo = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut b = b;
        let mut buf = [0u8; 5];
        b.read_exact(&mut buf).unwrap();
        b.write_all(&buf).unwrap();
    });
    let data = *b"hello";
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: zeroed msghdr is valid; filled with the one iovec above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let mut rbuf = [0u8; 16];
    // SAFETY: msg, iov, data and rbuf outlive the waits below, which take both
    // completions.
    unsafe {
        r.send_msg(0, &msg, 0, 1).unwrap();
        r.recv(0, rbuf.as_mut_ptr(), rbuf.len() as u32, 2).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 2 {
        assert!(r.enter(1, Some(Duration::from_secs(5))).unwrap());
        r.take(&mut got);
    }
    got.sort_by_key(|c| c.user_data);
    assert_eq!(
        got[0],
        Cqe {
            user_data: 1,
            result: 5,
            flags: 0
        }
    );
    assert_eq!(got[1].user_data, 2);
    assert_eq!(&rbuf[..got[1].result as usize], b"hello");
    assert_eq!(r.in_flight(), 0);
    echo.join().unwrap();
}

#[test]
fn a_silent_peer_times_out_and_drain_cancels() {
    if SockRing::probe().is_err() {
        return;
    }
    let (a, _b) = pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let mut rbuf = [0u8; 16];
    // SAFETY: drain below completes the receive before rbuf goes away.
    unsafe { r.recv(0, rbuf.as_mut_ptr(), 16, 7).unwrap() };
    let t = Instant::now();
    assert!(!r.enter(1, Some(Duration::from_millis(50))).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(40));
    assert_eq!(r.in_flight(), 1);
    assert!(r.drain(&[7], Duration::from_secs(5)));
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn a_closed_peer_completes_the_receive_with_zero() {
    if SockRing::probe().is_err() {
        return;
    }
    let (a, b) = pair();
    let mut r = SockRing::open(&[a.as_raw_fd()], 8).unwrap();
    let mut rbuf = [0u8; 16];
    // SAFETY: the wait below takes the receive's completion before rbuf goes away.
    unsafe { r.recv(0, rbuf.as_mut_ptr(), 16, 3).unwrap() };
    drop(b);
    let mut got = Vec::new();
    assert!(r.enter(1, Some(Duration::from_secs(5))).unwrap());
    r.take(&mut got);
    assert_eq!(
        got,
        vec![Cqe {
            user_data: 3,
            result: 0,
            flags: 0
        }]
    );
}

#[test]
fn a_reply_that_came_while_not_waiting_is_taken_and_polls_readable() {
    for setup in ["defer", "coop", "plain"] {
        a_reply_that_came_while_not_waiting(setup);
    }
}

fn a_reply_that_came_while_not_waiting(setup: &str) {
    if SockRing::probe().is_err() {
        return;
    }
    let (a, b) = pair();
    let mut r = SockRing::open_as(&[a.as_raw_fd()], 8, setup).unwrap();
    let mut rbuf = [0u8; 16];
    // SAFETY: the loop below takes the receive's completion before rbuf goes away.
    unsafe { r.recv(0, rbuf.as_mut_ptr(), 16, 4).unwrap() };
    assert!(r.enter(0, Some(Duration::ZERO)).unwrap());
    {
        use std::io::Write;
        (&b).write_all(b"late").unwrap();
    }
    // What multipath does: poll the ring fd, then look without waiting. On a
    // DEFER_TASKRUN ring the receive completes only when an enter runs its work.
    let mut pfd = libc::pollfd {
        fd: r.fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 5000) }, 1);
    let mut got = Vec::new();
    r.take(&mut got);
    assert_eq!(
        got,
        vec![Cqe {
            user_data: 4,
            result: 4,
            flags: 0
        }],
        "set up as {}",
        r.mode()
    );
    assert_eq!(&rbuf[..4], b"late");
}

#[test]
fn a_deferred_ring_drained_from_another_thread_says_to_keep_the_buffers() {
    if SockRing::probe().is_err() {
        return;
    }
    let (a, _b) = pair();
    let mut r = SockRing::open_as(&[a.as_raw_fd()], 8, "defer").unwrap();
    if r.mode() != "defer_taskrun" {
        eprintln!("skipped: the ring is set up as {}", r.mode());
        return;
    }
    // Kept for the process's life, as the queue keeps them when drain says so.
    let rbuf: &'static mut [u8] = Box::leak(vec![0u8; 16].into_boxed_slice());
    // SAFETY: the buffer is leaked: it outlives whatever the kernel does with it.
    unsafe { r.recv(0, rbuf.as_mut_ptr(), 16, 9).unwrap() };
    assert!(r.enter(0, Some(Duration::ZERO)).unwrap());
    let drained = std::thread::spawn(move || r.drain(&[9], Duration::from_millis(200)))
        .join()
        .unwrap();
    assert!(!drained);
}

#[test]
fn a_deferred_ring_opened_on_one_thread_runs_on_another() {
    if SockRing::probe().is_err() {
        return;
    }
    let (a, b) = pair();
    let r = SockRing::open_as(&[a.as_raw_fd()], 8, "defer").unwrap();
    let got = std::thread::spawn(move || {
        let mut r = r;
        let mut rbuf = [0u8; 16];
        // SAFETY: the wait below takes the receive's completion before rbuf goes away.
        unsafe { r.recv(0, rbuf.as_mut_ptr(), 16, 5).unwrap() };
        {
            use std::io::Write;
            (&b).write_all(b"moved").unwrap();
        }
        let mut got = Vec::new();
        assert!(r.enter(1, Some(Duration::from_secs(5))).unwrap());
        r.take(&mut got);
        assert!(r.drain(&[5], Duration::from_secs(1)));
        (got, rbuf)
    })
    .join()
    .unwrap();
    assert_eq!(
        got.0,
        vec![Cqe {
            user_data: 5,
            result: 5,
            flags: 0
        }]
    );
    assert_eq!(&got.1[..5], b"moved");
}
