//! The multipath target and queue over fake paths (no network): the check that paths lead to
//! one logical unit, tags coming back to the caller, failover with reissue, the no-path
//! deadline, reconnection, access states (ANA) and path-related statuses.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::report::{MultipathReport, STATS_KEY};
use super::selector::Policy;
use super::uri::Options;
use super::{MultipathTarget, Opener, LU_ID, MULTI_CONN};
use crate::engine::{
    AccessState, Completion, Io, Op, Queue, QueueConfig, Target, TargetInfo, PATH_ERROR,
};
use crate::error::EngineError;
use crate::Arena;

/// A path: completes what it is sent at the next reap, unless told to fail (then every call
/// of its queues and every open fails, as a cut link does).
#[derive(Clone)]
struct Link {
    down: Arc<AtomicBool>,
    /// Takes I/O and never answers (a link that drops everything without closing).
    silent: Arc<AtomicBool>,
    /// Answers every I/O with a path-related status (a controller whose ANA state serves none).
    path_error: Arc<AtomicBool>,
    /// The access state the target reports.
    access: Arc<Mutex<Option<AccessState>>>,
    /// Times the state was read again (`refresh_access_state`).
    refreshes: Arc<AtomicUsize>,
    opens: Arc<AtomicUsize>,
    /// A socket the next queue opened names as its readiness (and owns).
    sock: Arc<Mutex<Option<TcpStream>>>,
    /// Completes only in a reap that may wait (`min` > 0), as an engine's blocking receive
    /// does; nothing shows on its socket.
    lazy: Arc<AtomicBool>,
    /// Every reap of its queues: (min, completions given).
    reaps: Arc<Mutex<Vec<(usize, usize)>>>,
    /// Its completions wait on its socket, as a real engine's do until a receive: its
    /// readiness never says `held`, so they come back only once the socket is seen ready.
    on_socket: Arc<AtomicBool>,
}

impl Link {
    fn new() -> Link {
        Link {
            down: Arc::new(AtomicBool::new(false)),
            silent: Arc::new(AtomicBool::new(false)),
            path_error: Arc::new(AtomicBool::new(false)),
            access: Arc::new(Mutex::new(None)),
            refreshes: Arc::new(AtomicUsize::new(0)),
            opens: Arc::new(AtomicUsize::new(0)),
            sock: Arc::new(Mutex::new(None)),
            lazy: Arc::new(AtomicBool::new(false)),
            reaps: Arc::new(Mutex::new(Vec::new())),
            on_socket: Arc::new(AtomicBool::new(false)),
        }
    }

    fn set_access(&self, a: Option<AccessState>) {
        *self.access.lock().unwrap() = a;
    }
}

struct FakeTarget {
    info: TargetInfo,
    link: Link,
}

fn cut() -> EngineError {
    EngineError::Disconnected {
        peer: "fake".into(),
        reason: "cut".into(),
    }
}

impl Target for FakeTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn open_queue(&self, _cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        if self.link.down.load(Ordering::SeqCst) {
            return Err(cut());
        }
        self.link.opens.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(FakeQueue {
            link: self.link.clone(),
            done: Vec::new(),
            sock: self.link.sock.lock().unwrap().take(),
        }))
    }

    fn access_state(&self) -> Option<AccessState> {
        *self.link.access.lock().unwrap()
    }

    fn refresh_access_state(&self) -> Result<Option<AccessState>, EngineError> {
        self.link.refreshes.fetch_add(1, Ordering::SeqCst);
        Ok(self.access_state())
    }
}

struct FakeQueue {
    link: Link,
    done: Vec<Completion>,
    sock: Option<TcpStream>,
}

impl Queue for FakeQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        if self.link.down.load(Ordering::SeqCst) {
            return Err(cut());
        }
        if self.link.silent.load(Ordering::SeqCst) {
            return Ok(());
        }
        let result = if self.link.path_error.load(Ordering::SeqCst) {
            PATH_ERROR
        } else {
            0
        };
        self.done.extend(ios.iter().map(|io| Completion {
            tag: io.tag,
            result,
        }));
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        if self.link.down.load(Ordering::SeqCst) {
            return Err(cut());
        }
        let n = if min > 0 || !self.link.lazy.load(Ordering::SeqCst) {
            let n = self.done.len();
            out.append(&mut self.done);
            n
        } else {
            0
        };
        self.link.reaps.lock().unwrap().push((min, n));
        Ok(())
    }

    fn readiness(&self) -> Option<crate::engine::Readiness<'_>> {
        use std::os::fd::AsFd;
        self.sock.as_ref().map(|s| crate::engine::Readiness {
            fd: s.as_fd(),
            write: false,
            held: !self.done.is_empty()
                && !self.link.lazy.load(Ordering::SeqCst)
                && !self.link.on_socket.load(Ordering::SeqCst),
        })
    }
}

fn opener(link: &Link, lu: &str, size: u64, multi_conn: Option<bool>) -> Opener {
    let (link, lu) = (link.clone(), lu.to_string());
    Arc::new(move || {
        let mut params = BTreeMap::new();
        params.insert(LU_ID.to_string(), lu.clone().into());
        if let Some(m) = multi_conn {
            params.insert(MULTI_CONN.to_string(), m.into());
        }
        Ok(Arc::new(FakeTarget {
            info: TargetInfo {
                uri: "fake://x".into(),
                engine: "fake".into(),
                size,
                block_size: 512,
                params,
                ..TargetInfo::default()
            },
            link: link.clone(),
        }) as Arc<dyn Target>)
    })
}

fn cfg() -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth: 8,
        max_len: 4096,
        arena: Arc::new(Arena::new(8 * 4096)),
        io_timeout: Duration::from_secs(5),
        socket_ring: None,
    }
}

fn io(tag: u32) -> Io {
    Io {
        tag,
        op: Op::Read,
        offset: tag as u64 * 4096,
        len: 4096,
        buf: tag as usize * 4096,
        fua: false,
    }
}

fn report(q: &dyn Queue) -> MultipathReport {
    serde_json::from_value(q.stats()[STATS_KEY].clone()).unwrap()
}

fn two_paths(opts: Options) -> (Vec<Link>, Box<dyn Queue>) {
    let links = vec![Link::new(), Link::new()];
    let openers = links
        .iter()
        .map(|l| opener(l, "lu-1", 1 << 20, None))
        .collect();
    let t = MultipathTarget::new("fake://a,b", openers, opts).unwrap();
    let q = t.open_queue(&cfg()).unwrap();
    (links, q)
}

const RR: Options = Options {
    policy: Policy::RoundRobin,
    failback: super::selector::Failback::Immediate,
    path_timeout: None,
    no_path_retry: Duration::from_secs(30),
};

#[test]
fn paths_to_different_units_or_without_multi_conn_are_bad_input() {
    let l = Link::new();
    let cases = [
        (opener(&l, "lu-2", 1 << 20, None), "different logical units"),
        (opener(&l, "lu-1", 2 << 20, None), "different logical units"),
        (opener(&l, "lu-1", 1 << 20, Some(false)), "CAN_MULTI_CONN"),
    ];
    for (second, want) in cases {
        let openers = vec![opener(&l, "lu-1", 1 << 20, None), second];
        let Err(e) = MultipathTarget::new("fake://a,b", openers, RR) else {
            panic!("{want}: accepted");
        };
        assert!(e.is_usage() && e.to_string().contains(want), "{e}");
    }
    let ok = vec![
        opener(&l, "lu-1", 1 << 20, Some(true)),
        opener(&l, "lu-1", 1 << 20, Some(true)),
    ];
    assert!(MultipathTarget::new("fake://a,b", ok, RR).is_ok());
}

#[test]
fn every_tag_comes_back_and_round_robin_uses_both_paths() {
    let (_links, mut q) = two_paths(RR);
    let ios: Vec<Io> = (0..8).map(io).collect();
    q.submit(&ios).unwrap();
    let mut out = Vec::new();
    q.reap(8, &mut out).unwrap();
    let mut tags: Vec<u32> = out.iter().map(|c| c.tag).collect();
    tags.sort();
    assert_eq!(tags, (0..8).collect::<Vec<_>>());
    let r = report(q.as_ref());
    assert_eq!((r.paths[0].ios, r.paths[1].ios), (4, 4));
    assert_eq!(r.paths[0].bytes, 4 * 4096);
    assert!(q.submit(&[io(8)]).is_err(), "a tag above the depth");
}

#[test]
fn a_failed_path_reissues_its_ios_and_comes_back_after_its_backoff() {
    let (links, mut q) = two_paths(RR);
    q.submit(&(0..4).map(io).collect::<Vec<_>>()).unwrap();
    // The link goes down with two I/Os on it: the reap finds it, they go to path 0.
    links[1].down.store(true, Ordering::SeqCst);
    let mut out = Vec::new();
    q.reap(4, &mut out).unwrap();
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|c| c.result == 0));
    let r = report(q.as_ref());
    assert_eq!(r.reissued, 2, "{r:?}");
    assert_eq!(r.paths[1].failures, 1);
    assert_eq!(r.paths[0].ios, 4);
    assert_eq!(r.events[0].event, "failed");
    // While it is down, everything goes to path 0.
    q.submit(&(0..8).map(io).collect::<Vec<_>>()).unwrap();
    out.clear();
    q.reap(8, &mut out).unwrap();
    assert_eq!(report(q.as_ref()).paths[0].ios, 12);
    // Back up: reconnected after the backoff (500 ms) and used again.
    links[1].down.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while report(q.as_ref()).paths[1].reinstatements == 0 {
        assert!(Instant::now() < deadline, "not reinstated");
        q.reap(0, &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    q.submit(&(0..8).map(io).collect::<Vec<_>>()).unwrap();
    out.clear();
    q.reap(8, &mut out).unwrap();
    let r = report(q.as_ref());
    assert!(r.paths[1].ios >= 2, "{r:?}");
    let events: Vec<&str> = r.events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events.last(), Some(&"reinstated"), "{events:?}");
}

#[test]
fn with_no_path_left_ios_wait_for_no_path_retry_then_fail() {
    let opts = Options {
        no_path_retry: Duration::from_millis(200),
        ..RR
    };
    let (links, mut q) = two_paths(opts);
    for l in &links {
        l.down.store(true, Ordering::SeqCst);
    }
    let started = Instant::now();
    q.submit(&(0..3).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(3, &mut out).unwrap();
    let waited = started.elapsed();
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|c| c.result == -libc::EIO), "{out:?}");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert_eq!(report(q.as_ref()).failed_no_path, 3);
}

#[test]
fn a_path_back_before_no_path_retry_takes_the_waiting_ios() {
    let (links, mut q) = two_paths(RR);
    for l in &links {
        l.down.store(true, Ordering::SeqCst);
    }
    q.submit(&(0..2).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(0, &mut out).unwrap();
    assert!(out.is_empty(), "they wait");
    links[0].down.store(false, Ordering::SeqCst);
    q.reap(2, &mut out).unwrap();
    assert!(out.iter().all(|c| c.result == 0), "{out:?}");
    assert_eq!(report(q.as_ref()).failed_no_path, 0);
}

#[test]
fn a_silent_path_fails_after_path_timeout_and_its_ios_go_elsewhere() {
    let opts = Options {
        path_timeout: Some(Duration::from_millis(150)),
        ..RR
    };
    let (links, mut q) = two_paths(opts);
    links[1].silent.store(true, Ordering::SeqCst);
    let started = Instant::now();
    q.submit(&(0..4).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(4, &mut out).unwrap();
    let waited = started.elapsed();
    assert!(
        out.iter().all(|c| c.result == 0) && out.len() == 4,
        "{out:?}"
    );
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    let r = report(q.as_ref());
    assert_eq!(r.reissued, 2, "{r:?}");
    let reason = r.events[0].reason.as_deref().unwrap_or_default();
    assert!(reason.contains("no completion"), "{reason}");
}

#[test]
fn a_failed_paths_connection_is_reset_not_closed() {
    // A write still in a failed path's socket must never reach the target after its reissue
    // elsewhere: the path's connection ends with a reset (its data discarded), which the
    // peer sees as ECONNRESET; an orderly close would be EOF after the data.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let opts = Options {
        path_timeout: Some(Duration::from_millis(100)),
        ..RR
    };
    let links = [Link::new(), Link::new()];
    *links[1].sock.lock().unwrap() =
        Some(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let (mut peer, _) = listener.accept().unwrap();
    let openers = links
        .iter()
        .map(|l| opener(l, "lu-1", 1 << 20, None))
        .collect();
    let t = MultipathTarget::new("fake://a,b", openers, opts).unwrap();
    let mut q = t.open_queue(&cfg()).unwrap();
    links[1].silent.store(true, Ordering::SeqCst);
    q.submit(&(0..4).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(4, &mut out).unwrap();
    assert_eq!(report(q.as_ref()).paths[1].failures, 1);
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let e = peer.read(&mut [0u8; 16]);
    assert!(
        matches!(&e, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{e:?}"
    );
}

/// Which path each of `n` I/Os went to (each completed before the next is sent).
fn carried_by(q: &mut Box<dyn Queue>, n: u32) -> Vec<usize> {
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for i in 0..n {
        let before = report(q.as_ref());
        q.submit(&[io(i % 8)]).unwrap();
        out.clear();
        q.reap(1, &mut out).unwrap();
        assert_eq!(out[0].result, 0, "{out:?}");
        let after = report(q.as_ref());
        let p = (0..after.paths.len())
            .find(|&p| after.paths[p].ios > before.paths[p].ios)
            .unwrap();
        paths.push(p);
    }
    paths
}

#[test]
fn optimized_paths_first_and_the_state_moves_them() {
    let (links, mut q) = {
        let links = vec![Link::new(), Link::new()];
        links[0].set_access(Some(AccessState::NonOptimized));
        links[1].set_access(Some(AccessState::Optimized));
        let openers = links
            .iter()
            .map(|l| opener(l, "lu-1", 1 << 20, None))
            .collect();
        let t = MultipathTarget::new("fake://a,b", openers, RR).unwrap();
        let q = t.open_queue(&cfg()).unwrap();
        (links, q)
    };
    // Round-robin would take turns: the state says path 1 only.
    assert_eq!(carried_by(&mut q, 6), [1; 6]);
    let r = report(q.as_ref());
    assert_eq!(r.paths[0].access_state.as_deref(), Some("non-optimized"));
    // The optimized path becomes inaccessible: the non-optimized one takes the I/O, and an
    // event says why.
    links[1].set_access(Some(AccessState::Inaccessible));
    assert_eq!(carried_by(&mut q, 4), [0; 4]);
    let r = report(q.as_ref());
    let e = r.events.last().unwrap();
    assert_eq!((e.event.as_str(), e.path), ("access_state", 1));
    assert_eq!(e.access_state.as_deref(), Some("inaccessible"));
    assert_eq!(e.reason.as_deref(), Some("was optimized"));
    assert_eq!(r.paths[1].access_state.as_deref(), Some("inaccessible"));
    // Persistent loss and change carry nothing either; with no usable path I/O waits.
    links[0].set_access(Some(AccessState::Change));
    q.submit(&[io(0)]).unwrap();
    let mut out = Vec::new();
    q.reap(0, &mut out).unwrap();
    assert!(out.is_empty(), "waiting: {out:?}");
    // Back to optimized: it goes there.
    links[1].set_access(Some(AccessState::Optimized));
    q.reap(1, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(carried_by(&mut q, 3), [1; 3]);
    assert_eq!(r.failed_no_path, 0);
}

#[test]
fn a_path_related_status_takes_the_path_out_and_the_io_is_sent_again() {
    let (links, mut q) = two_paths(RR);
    links[1].path_error.store(true, Ordering::SeqCst);
    q.submit(&(0..4).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(4, &mut out).unwrap();
    // Every I/O succeeds: the two path 1 answered with a path status went to path 0.
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|c| c.result == 0), "{out:?}");
    let r = report(q.as_ref());
    assert_eq!(r.paths[1].path_errors, 2, "{r:?}");
    assert_eq!((r.paths[1].failures, r.paths[1].ios), (1, 0));
    assert_eq!(r.paths[0].ios, 4);
    assert_eq!(r.reissued, 2);
    let reason = r.events[0].reason.as_deref().unwrap_or_default();
    assert!(reason.contains("path-related status"), "{reason}");
    // The retry reads the state again before the path carries I/O: it is inaccessible now,
    // so the path is back but gets nothing.
    links[1].set_access(Some(AccessState::Inaccessible));
    let deadline = Instant::now() + Duration::from_secs(5);
    while report(q.as_ref()).paths[1].reinstatements == 0 {
        assert!(Instant::now() < deadline, "not reinstated");
        q.reap(0, &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(links[1].refreshes.load(Ordering::SeqCst) >= 1);
    links[1].path_error.store(false, Ordering::SeqCst);
    assert_eq!(carried_by(&mut q, 4), [0; 4]);
    links[1].set_access(Some(AccessState::Optimized));
    let picks = carried_by(&mut q, 4);
    assert!(picks.contains(&1), "{picks:?}");
}

#[test]
fn a_path_is_reaped_only_when_its_socket_is_ready_or_it_holds_completions() {
    // Path 0 takes I/O and answers nothing; its socket shows nothing until its peer writes.
    // Path 1 has no socket and completes at once.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let links = [Link::new(), Link::new()];
    *links[0].sock.lock().unwrap() =
        Some(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let (mut peer, _) = listener.accept().unwrap();
    links[0].silent.store(true, Ordering::SeqCst);
    let openers = links
        .iter()
        .map(|l| opener(l, "lu-1", 1 << 20, None))
        .collect();
    let t = MultipathTarget::new("fake://a,b", openers, RR).unwrap();
    let mut q = t.open_queue(&cfg()).unwrap();
    q.submit(&(0..4).map(io).collect::<Vec<_>>()).unwrap();
    let mut out = Vec::new();
    q.reap(2, &mut out).unwrap();
    q.reap(0, &mut out).unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    // No reap that could only have found nothing (an EAGAIN receive on a real socket).
    assert_eq!(
        *links[0].reaps.lock().unwrap(),
        [],
        "path 0 reaped while not ready"
    );
    assert!(!links[1].reaps.lock().unwrap().is_empty());
    // Its socket turns readable: the next look reaps it.
    std::io::Write::write_all(&mut peer, b"x").unwrap();
    q.reap(0, &mut out).unwrap();
    assert_eq!(*links[0].reaps.lock().unwrap(), [(0, 0)]);
}

#[test]
fn a_lone_busy_path_is_waited_on_in_its_own_blocking_reap() {
    // The path completes only in a reap that may wait, and its socket never shows it: only
    // the path's own blocking reap can bring the completion back.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let link = Link::new();
    *link.sock.lock().unwrap() = Some(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let _peer = listener.accept().unwrap();
    link.lazy.store(true, Ordering::SeqCst);
    let opts = Options {
        path_timeout: Some(Duration::from_secs(2)),
        ..Options::default()
    };
    let t =
        MultipathTarget::new("fake://a", vec![opener(&link, "lu-1", 1 << 20, None)], opts).unwrap();
    let mut q = t.open_queue(&cfg()).unwrap();
    // On a thread: without that reap nothing ever completes, and the test must fail, not hang.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        for i in 0..3 {
            q.submit(&[io(i)]).unwrap();
            out.clear();
            q.reap(1, &mut out).unwrap();
            let _ = tx.send(out.clone());
        }
    });
    for i in 0..3 {
        let out = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("no completion: the lone path's own blocking reap was not used");
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].tag, out[0].result), (i, 0));
    }
    let reaps = link.reaps.lock().unwrap();
    assert!(
        reaps.iter().any(|&(min, n)| min == 1 && n == 1),
        "{reaps:?}"
    );
}

#[test]
fn a_deadline_already_past_still_reaps_what_the_sockets_hold() {
    // An open loop behind its schedule asks with a deadline that has passed, every time: each
    // such call must still look at the sockets, or nothing is ever reaped again.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let link = Link::new();
    *link.sock.lock().unwrap() = Some(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let (mut peer, _) = listener.accept().unwrap();
    link.on_socket.store(true, Ordering::SeqCst);
    let t =
        MultipathTarget::new("fake://a", vec![opener(&link, "lu-1", 1 << 20, None)], RR).unwrap();
    let mut q = t.open_queue(&cfg()).unwrap();
    q.submit(&[io(0), io(1)]).unwrap();
    std::io::Write::write_all(&mut peer, b"x").unwrap();
    let mut out = Vec::new();
    q.reap_until(Instant::now(), &mut out).unwrap();
    let mut tags: Vec<u32> = out.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, [0, 1], "nothing reaped with the deadline past");
}
