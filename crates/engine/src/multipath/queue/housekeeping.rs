//! Between reaps: reconnections that finished, failed paths due for a retry, I/Os waiting
//! for a path, the `no_path_retry` deadline, path timeouts and access states.

use std::sync::mpsc::TryRecvError;
use std::time::Instant;

use super::{event, MultipathQueue};
use crate::engine::{AccessState, Completion};
use crate::error::EngineError;
use crate::multipath::paths::reconnect;
use crate::multipath::selector::{Group, State};
use crate::poison::lock;

impl MultipathQueue {
    /// Reconnections, retries, waiting I/Os, the no-path deadline and path timeouts.
    pub(super) fn housekeeping(&mut self, now: Instant, out: &mut Vec<Completion>) {
        for p in 0..self.paths.len() {
            let Some(rx) = &self.paths[p].reconnect else {
                continue;
            };
            let got = match rx.try_recv() {
                Err(TryRecvError::Empty) => continue,
                Ok(r) => r,
                Err(TryRecvError::Disconnected) => {
                    Err(EngineError::Invalid("reconnection thread ended".into()))
                }
            };
            self.paths[p].reconnect = None;
            match got {
                Ok(q) => {
                    self.paths[p].queue = Some(q);
                    self.paths[p].target = lock(&self.shared.paths[p]).clone();
                    self.paths[p].report.reinstatements += 1;
                    self.sel.reinstated(p, now);
                    self.events
                        .push(event(p, self.cfg.worker, "reinstated", None));
                }
                Err(e) => {
                    self.sel.retry_failed(p, now);
                    self.events.push(event(
                        p,
                        self.cfg.worker,
                        "reconnect_failed",
                        Some(e.to_string()),
                    ));
                }
            }
        }
        self.poll_access(now);
        while let Some(p) = self.sel.due(now) {
            let (tx, rx) = std::sync::mpsc::channel();
            let shared = self.shared.clone();
            let cfg = self.cfg.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("multipath reconnect {p}"))
                .spawn(move || {
                    let _ = tx.send(reconnect(&shared, p, &cfg));
                });
            match spawned {
                Ok(_) => self.paths[p].reconnect = Some(rx),
                Err(_) => self.sel.retry_failed(p, now),
            }
        }
        if !self.waiting.is_empty() && self.sel.any_usable() {
            let mut work: Vec<u32> = self.waiting.drain(..).collect();
            self.route(&mut work, now);
        }
        if !self.waiting.is_empty() && self.sel.no_path_expired(now) {
            for tag in self.waiting.drain(..) {
                let slot = &mut self.slots[tag as usize];
                if std::mem::replace(&mut slot.taken, false) {
                    self.in_flight -= 1;
                    self.failed_no_path += 1;
                    out.push(Completion {
                        tag,
                        result: -libc::EIO,
                    });
                }
            }
        }
        for p in 0..self.paths.len() {
            let silent = now.saturating_duration_since(self.paths[p].last_progress);
            if self.sel.state(p) == State::Active
                && self.sel.outstanding(p) > 0
                && silent >= self.path_timeout
            {
                let why = EngineError::Timeout {
                    peer: self.paths[p].report.uri.clone(),
                    secs: silent.as_secs_f64(),
                };
                let mut tags = self.fail(p, why, now);
                self.route(&mut tags, now);
            }
        }
    }

    /// Looks at every path's access state (an atomic load per path in the NVMe engine):
    /// before routing and between reaps, so no I/O is sent on a path whose state its target
    /// already reports as carrying none.
    pub(super) fn poll_access(&mut self, now: Instant) {
        for p in 0..self.paths.len() {
            let a = self.paths[p].target.access_state();
            if a != self.paths[p].access {
                self.access_changed(p, a, now);
            }
        }
    }

    /// Path `p`'s target reports another access state: the path changes group (none reported:
    /// optimized, as a path without ANA is).
    fn access_changed(&mut self, p: usize, a: Option<AccessState>, now: Instant) {
        let old = std::mem::replace(&mut self.paths[p].access, a);
        self.sel
            .set_group(p, a.map_or(Group::Optimized, Group::from), now);
        let name = a.map(|a| a.name().to_string());
        self.paths[p].report.access_state = name.clone();
        let mut e = event(
            p,
            self.cfg.worker,
            "access_state",
            Some(format!("was {}", old.map_or("not reported", |o| o.name()))),
        );
        e.access_state = Some(name.unwrap_or_else(|| "not reported".into()));
        self.events.push(e);
    }
}
