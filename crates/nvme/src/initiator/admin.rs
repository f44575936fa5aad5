//! What the engine keeps beside a controller's admin queue: the namespace's ANA state through
//! this controller ([`Ana`]), the thread that keeps the controller alive and that state
//! current, and the I/O queue ids in use.
//!
//! The state is read when the target opens, and again (on the admin thread, never on a
//! stream's path) when an ANA change notice arrives or an I/O queue saw a path-related status
//! ([`Ana::mark_stale`]), as Linux's host re-reads the page from its `ana_work`; a multipath
//! reconnection reads it itself ([`Target::refresh_access_state`]).
//!
//! [`Target::refresh_access_state`]: sanbench_io::Target::refresh_access_state

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sanbench_io::{poison, AccessState};

use crate::host::ana::is_ana_change;
use crate::host::session::AdminSession;
use crate::host::HostError;
use crate::wire::ana::AnaState;

/// The namespace's ANA state through one controller.
#[derive(Default)]
pub(crate) struct Ana {
    /// `AnaState` code; 0 before the first read.
    state: AtomicU8,
    /// A re-read is wanted.
    stale: AtomicBool,
    /// Log page reads and change notices, for the result's parameters.
    pub reads: AtomicU64,
    pub notices: AtomicU64,
    /// The controller sends change notices; without them a state that carries no I/O is
    /// read again every [`UNNOTIFIED_REREAD`] (no I/O goes there to bring a path-related
    /// status back).
    pub notices_on: AtomicBool,
}

/// How often a state that carries no I/O is read again when the controller sends no change
/// notices.
const UNNOTIFIED_REREAD: Duration = Duration::from_secs(1);

impl Ana {
    pub fn get(&self) -> Option<AnaState> {
        AnaState::from_code(self.state.load(Ordering::Acquire))
    }

    pub fn set(&self, s: AnaState) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.state.store(s.code(), Ordering::Release);
    }

    /// Asks the admin thread to read the page again.
    pub fn mark_stale(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Reads the state through `a` now.
    pub fn read(&self, a: &mut AdminSession) -> Result<Option<AnaState>, HostError> {
        let s = a.ana_state()?;
        if let Some(s) = s {
            self.set(s);
        }
        Ok(s)
    }
}

/// The engine's name for an ANA state.
pub(crate) fn access(s: AnaState) -> AccessState {
    match s {
        AnaState::Optimized => AccessState::Optimized,
        AnaState::NonOptimized => AccessState::NonOptimized,
        AnaState::Inaccessible => AccessState::Inaccessible,
        AnaState::PersistentLoss => AccessState::PersistentLoss,
        AnaState::Change => AccessState::Change,
    }
}

/// How often the admin thread looks for a change notice or a re-read to do (with ANA; a
/// thread that only sends keep-alives wakes every 50 ms as before).
const ANA_TICK: Duration = Duration::from_millis(10);

/// Starts the admin thread when there is something to do: keep-alive every `kato_ms / 3`,
/// and with `ana` the change notices and re-reads. It ends with `stop`, or when the admin
/// queue fails (the controller is gone: I/O queues fail on their own, and a multipath
/// reconnection opens the target again).
pub(crate) fn spawn(
    admin: Arc<Mutex<AdminSession>>,
    stop: Arc<AtomicBool>,
    kato_ms: u32,
    ana: Option<Arc<Ana>>,
) -> Option<JoinHandle<()>> {
    if kato_ms == 0 && ana.is_none() {
        return None;
    }
    let every = (kato_ms > 0).then(|| Duration::from_millis(kato_ms as u64 / 3));
    let tick = if ana.is_some() {
        ANA_TICK
    } else {
        Duration::from_millis(50)
    };
    std::thread::Builder::new()
        .name("nvme admin".into())
        .spawn(move || {
            let mut last = Instant::now();
            let mut last_read = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                let mut a = poison::lock(&admin);
                if let Some(ana) = &ana {
                    let Ok(events) = a.take_events() else { return };
                    let n = events.iter().filter(|&&e| is_ana_change(e)).count() as u64;
                    if n > 0 {
                        ana.notices.fetch_add(n, Ordering::Relaxed);
                        ana.mark_stale();
                    }
                    if !ana.notices_on.load(Ordering::Relaxed)
                        && !ana.get().is_some_and(AnaState::serves_io)
                        && last_read.elapsed() >= UNNOTIFIED_REREAD
                    {
                        ana.mark_stale();
                    }
                    if ana.stale.swap(false, Ordering::AcqRel) {
                        last_read = Instant::now();
                        if ana.read(&mut a).is_err() {
                            return;
                        }
                    }
                }
                if every.is_some_and(|e| last.elapsed() >= e) {
                    last = Instant::now();
                    if a.keep_alive().is_err() {
                        return;
                    }
                }
            }
        })
        .ok()
}

/// The I/O queue ids of a controller: each queue takes one and gives it back when dropped.
/// Ids are handed out in turn, so one given back is not taken again at once (the controller
/// may not have seen its connection close yet).
pub(crate) struct Qids {
    used: Vec<bool>,
    next: usize,
}

impl Qids {
    /// Ids 1..=granted.
    pub fn new(granted: u16) -> Arc<Mutex<Qids>> {
        Arc::new(Mutex::new(Qids {
            used: vec![false; granted as usize],
            next: 0,
        }))
    }
}

/// An I/O queue id held; given back on drop.
pub(crate) struct Qid {
    pool: Arc<Mutex<Qids>>,
    pub qid: u16,
}

impl Qid {
    /// The next free id, or `None` when all are in use.
    pub fn take(pool: &Arc<Mutex<Qids>>) -> Option<Qid> {
        let mut p = poison::lock(pool);
        let n = p.used.len();
        let i = (0..n).map(|k| (p.next + k) % n).find(|&i| !p.used[i])?;
        p.used[i] = true;
        p.next = (i + 1) % n;
        Some(Qid {
            pool: pool.clone(),
            qid: i as u16 + 1,
        })
    }
}

impl Drop for Qid {
    fn drop(&mut self) {
        poison::lock(&self.pool).used[self.qid as usize - 1] = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_ids_go_round_and_come_back() {
        let pool = Qids::new(3);
        let a = Qid::take(&pool).unwrap();
        let b = Qid::take(&pool).unwrap();
        assert_eq!((a.qid, b.qid), (1, 2));
        drop(a);
        // 1 is free again but 3 comes first: a queue given back is not reused at once.
        let c = Qid::take(&pool).unwrap();
        assert_eq!(c.qid, 3);
        let d = Qid::take(&pool).unwrap();
        assert_eq!(d.qid, 1);
        assert!(Qid::take(&pool).is_none(), "all three in use");
        drop(b);
        assert_eq!(Qid::take(&pool).unwrap().qid, 2);
    }

    #[test]
    fn the_state_is_read_once_set() {
        let a = Ana::default();
        assert_eq!(a.get(), None);
        a.set(AnaState::NonOptimized);
        assert_eq!(a.get(), Some(AnaState::NonOptimized));
        assert_eq!(access(AnaState::Change), AccessState::Change);
    }
}
