//! ANA on sanbench's target with two ports, through the crate's own host and engine: what
//! Linux's native multipath needs from Identify (CMIC, OAES, ANA fields, MNAN; NMIC and
//! ANAGRPID; one NGUID and distinct controller ids across ports), the log page per port (RGO,
//! change count), I/O refused with ANA Inaccessible without DNR, the change notice (enabled,
//! masked until the page is read), and the engine's state following a change.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sanbench_io::{AccessState, Arena, Io, Op, QueueConfig, PATH_ERROR};
use sanbench_nvme::host::ana::is_ana_change;
use sanbench_nvme::host::conn::HostOptions;
use sanbench_nvme::host::session::{connect_admin, connect_io, exec, AdminSession};
use sanbench_nvme::target::{AnaControl, AnaSetting, Target, TargetConfig};
use sanbench_nvme::wire::ana::{self, anacap, cmic, AnaLog, AnaState};
use sanbench_nvme::wire::cmd::{io, rw_sqe, DataPtr, Rw};
use sanbench_nvme::wire::status::Status;

const NQN: &str = "nqn.2026-11.io.sanbench:ana";

struct Running {
    ports: Vec<SocketAddr>,
    ctl: AnaControl,
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

/// Two ports, two namespaces; `ana` as `--ana` gives it.
fn start(ana: &[&str]) -> Running {
    let t = Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        also_listen: vec!["127.0.0.1:0".parse().unwrap()],
        nqn: NQN.into(),
        size: 8 << 20,
        namespaces: 2,
        ana: ana.iter().map(|s| s.parse().unwrap()).collect(),
        ..TargetConfig::default()
    })
    .unwrap();
    let ports = t.local_addrs();
    let ctl = t.ana_control();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = Some(std::thread::spawn(move || t.run(s).unwrap()));
    Running {
        ports,
        ctl,
        stop,
        thread,
    }
}

fn opts() -> HostOptions {
    HostOptions {
        timeout: Duration::from_secs(5),
        ..HostOptions::default()
    }
}

fn set(r: &Running, s: &str) {
    r.ctl.set(&[s.parse::<AnaSetting>().unwrap()]).unwrap();
}

/// Waits up to `within` for an event on the admin session.
fn wait_event(a: &mut AdminSession, within: Duration) -> Option<u32> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(e) = a.take_events().unwrap().first() {
            return Some(*e);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn identify_says_what_linux_multipath_needs() {
    let r = start(&[]);
    let a = connect_admin(r.ports[0], NQN, 1, 2, &opts()).unwrap();
    let b = connect_admin(r.ports[1], NQN, 1, 2, &opts()).unwrap();
    for s in [&a, &b] {
        let id = &s.id;
        assert_eq!(
            id.cmic & (cmic::MULTI_CTRL | cmic::ANA),
            cmic::MULTI_CTRL | cmic::ANA,
            "{id:?}"
        );
        assert_ne!(id.oaes & ana::aen::CFG_ANA_CHANGE, 0);
        assert!(id.anatt > 0);
        for bit in [
            anacap::OPTIMIZED,
            anacap::NON_OPTIMIZED,
            anacap::INACCESSIBLE,
        ] {
            assert_ne!(id.anacap & bit, 0, "ANACAP {:#x}", id.anacap);
        }
        assert!(id.anagrpmax >= 1 && id.nanagrpid >= 1);
        // Linux: "Invalid MNAN value" unless 0 < MNAN <= NN.
        assert!(
            id.mnan >= 1 && id.mnan <= id.nn,
            "MNAN {} NN {}",
            id.mnan,
            id.nn
        );
        let ns = s.ns.as_ref().unwrap();
        assert_eq!(ns.nmic & ana::NMIC_SHARED, ana::NMIC_SHARED);
        assert!(ns.anagrpid >= 1 && ns.anagrpid <= id.anagrpmax);
    }
    // One subsystem, one namespace identity, two controllers.
    assert_eq!(a.id.subnqn, b.id.subnqn);
    assert_eq!(a.ns.as_ref().unwrap().nguid, b.ns.as_ref().unwrap().nguid);
    assert_eq!(
        a.ns.as_ref().unwrap().anagrpid,
        b.ns.as_ref().unwrap().anagrpid
    );
    assert_ne!(a.cntlid, b.cntlid);
}

#[test]
fn each_port_reports_its_own_state_in_the_log_page() {
    let r = start(&["2=non-optimized"]);
    let mut a = connect_admin(r.ports[0], NQN, 1, 2, &opts()).unwrap();
    let mut b = connect_admin(r.ports[1], NQN, 2, 2, &opts()).unwrap();
    assert_eq!(a.ana_state().unwrap(), Some(AnaState::Optimized));
    assert_eq!(b.ana_state().unwrap(), Some(AnaState::NonOptimized));
    let before = b.ana_log().unwrap();
    assert_eq!(before.groups.len(), 1);
    assert_eq!(
        before.groups[0].nsids,
        [1, 2],
        "ascending NSIDs, both namespaces"
    );
    // Linux's buffer: 16 + NANAGRPID * 32 + MNAN * 4; the page fits it exactly.
    let want = AnaLog::max_len(b.id.nanagrpid, b.id.mnan);
    assert_eq!(before.encode(false).len(), want);
    // Return Groups Only.
    let rgo = b
        .log_page_with(ana::LID, ana::LSP_RGO, u32::MAX, 48)
        .unwrap();
    let rgo = AnaLog::decode(&rgo).unwrap();
    assert!(rgo.groups[0].nsids.is_empty());
    assert_eq!(rgo.groups[0].state, AnaState::NonOptimized);
    // A change moves the port's count, and only that port's.
    set(&r, "2=inaccessible");
    let after = b.ana_log().unwrap();
    assert_eq!(after.groups[0].state, AnaState::Inaccessible);
    assert!(after.chgcnt > before.chgcnt);
    assert_eq!(after.groups[0].chgcnt, after.chgcnt);
    assert_eq!(a.ana_state().unwrap(), Some(AnaState::Optimized));
    // By address, too.
    set(&r, &format!("{}=persistent-loss", r.ports[0]));
    assert_eq!(a.ana_state().unwrap(), Some(AnaState::PersistentLoss));
    // All or none: an unknown port changes nothing.
    let bad = ["1=optimized", "3=optimized"].map(|s| s.parse().unwrap());
    assert!(r.ctl.set(&bad).unwrap_err().contains("unknown port 3"));
    assert_eq!(r.ctl.states()[0].state, AnaState::PersistentLoss);
}

#[test]
fn io_through_a_port_that_serves_none_gets_the_path_status_without_dnr() {
    let r = start(&[]);
    let o = opts();
    let a = connect_admin(r.ports[0], NQN, 1, 2, &o).unwrap();
    let mut q = connect_io(r.ports[0], NQN, &a, 1, 32, &o).unwrap();
    let data = vec![7u8; 4096];
    let cmd = |cid: u16, opcode: u8| {
        rw_sqe(
            opcode,
            cid,
            Rw {
                nsid: 1,
                slba: 8,
                nlb: 8,
                fua: false,
            },
            DataPtr::Transport { len: 4096 },
        )
    };
    let st = |q: &mut _, cid, op, out: &[u8], inb: &mut [u8]| {
        Status::from_field(exec(q, cmd(cid, op), out, inb).unwrap().status.get())
    };
    let mut buf = vec![0u8; 4096];
    assert_eq!(st(&mut q, 1, io::WRITE, &data, &mut []), Status::SUCCESS);
    for (state, want) in [
        ("inaccessible", Status::ANA_INACCESSIBLE),
        ("persistent-loss", Status::ANA_PERSISTENT_LOSS),
        ("change", Status::ANA_TRANSITION),
    ] {
        set(&r, &format!("1={state}"));
        let got = st(&mut q, 2, io::READ, &[], &mut buf);
        assert_eq!(got, want, "{state}");
        // Linux fails over only a status without Do Not Retry.
        assert!(!got.dnr && got.is_path_error(), "{got:?}");
        // A write is refused before its data is asked for (in the capsule or not).
        assert_eq!(st(&mut q, 3, io::WRITE, &data, &mut []), want);
    }
    set(&r, "1=non-optimized");
    assert_eq!(st(&mut q, 4, io::READ, &[], &mut buf), Status::SUCCESS);
    assert_eq!(buf, data, "the refused write did not land");
}

#[test]
fn a_change_is_announced_once_until_the_page_is_read() {
    let r = start(&[]);
    let mut a = connect_admin(r.ports[0], NQN, 1, 2, &opts()).unwrap();
    let mut other = connect_admin(r.ports[1], NQN, 1, 2, &opts()).unwrap();
    assert!(a.enable_ana_events().unwrap());
    assert!(other.enable_ana_events().unwrap());
    set(&r, "1=inaccessible");
    let t0 = Instant::now();
    let e = wait_event(&mut a, Duration::from_secs(3)).expect("an ANA change notice");
    // The target looks every 50 ms; a wide margin for a loaded machine.
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(is_ana_change(e), "{e:#x}");
    assert_eq!(ana::aen::decode(e).2, ana::LID);
    // The other port's controller was not told: its state did not change.
    assert_eq!(wait_event(&mut other, Duration::from_millis(300)), None);
    // Masked until the page is read: a second change is not announced...
    set(&r, "1=non-optimized");
    assert_eq!(wait_event(&mut a, Duration::from_millis(300)), None);
    // ...and reading the page unmasks it.
    assert_eq!(a.ana_state().unwrap(), Some(AnaState::NonOptimized));
    set(&r, "1=optimized");
    assert!(wait_event(&mut a, Duration::from_secs(3)).is_some_and(is_ana_change));
}

#[test]
fn without_the_notice_enabled_nothing_is_announced() {
    let r = start(&[]);
    let mut a = connect_admin(r.ports[0], NQN, 1, 2, &opts()).unwrap();
    // An AER held, but Asynchronous Event Configuration left at 0.
    a.submit_aer().unwrap();
    set(&r, "1=inaccessible");
    assert_eq!(wait_event(&mut a, Duration::from_millis(400)), None);
    assert_eq!(a.ana_state().unwrap(), Some(AnaState::Inaccessible));
}

fn qcfg(arena: &Arc<Arena>) -> QueueConfig {
    QueueConfig {
        worker: 0,
        depth: 4,
        max_len: 4096,
        arena: arena.clone(),
        io_timeout: Duration::from_secs(5),
        socket_ring: None,
    }
}

/// Waits up to `within` for the engine's state to become `want`.
fn wait_state(t: &dyn sanbench_io::Target, want: AccessState, within: Duration) -> Duration {
    let t0 = Instant::now();
    while t.access_state() != Some(want) {
        assert!(
            t0.elapsed() < within,
            "still {:?}, want {want:?}",
            t.access_state()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}

#[test]
fn the_engine_follows_the_state_and_reports_path_errors() {
    let r = start(&["2=non-optimized"]);
    let uri = |p: usize| format!("nvme+tcp://{}/{NQN}/1", r.ports[p]);
    let t1 = sanbench_nvme::initiator::open(&uri(0)).unwrap();
    let t2 = sanbench_nvme::initiator::open(&uri(1)).unwrap();
    assert_eq!(t1.access_state(), Some(AccessState::Optimized));
    assert_eq!(t2.access_state(), Some(AccessState::NonOptimized));
    assert_eq!(t2.info().params["ana_state"], "non-optimized");
    assert_eq!(t2.info().params["ana_notices"], true);
    // Idle: the change notice alone brings the new state.
    set(&r, "1=inaccessible");
    wait_state(
        t1.as_ref(),
        AccessState::Inaccessible,
        Duration::from_secs(3),
    );
    let arena = Arc::new(Arena::new(4 * 4096));
    let mut q = t1.open_queue(&qcfg(&arena)).unwrap();
    let read = Io {
        tag: 0,
        op: Op::Read,
        offset: 0,
        len: 4096,
        buf: 0,
        fua: false,
    };
    q.submit(&[read]).unwrap();
    let mut out = Vec::new();
    q.reap(1, &mut out).unwrap();
    assert_eq!(out[0].result, PATH_ERROR);
    assert_eq!(q.stats()["path_errors"], 1);
    // Back: a refresh reads it at once, whatever the notice's timing.
    set(&r, "1=optimized");
    assert_eq!(
        t1.refresh_access_state().unwrap(),
        Some(AccessState::Optimized)
    );
    out.clear();
    q.submit(&[read]).unwrap();
    q.reap(1, &mut out).unwrap();
    assert_eq!(out[0].result, 0);
}
