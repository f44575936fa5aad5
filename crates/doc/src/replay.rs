//! The replay block of a target's result (`sanbench replay`): what the trace held, what was
//! replayed, and how faithfully, judged against the trace's own times.
//!
//! Fidelity is the issue lag (each I/O's submission minus the time the trace gives it,
//! scaled by `speed`) and the achieved against the recorded rate. Each I/O issued later than
//! the goal is counted by what held it ([`LateIos`]): nothing but this host (the stream was
//! not running, or woke late), every slot of `--qd` busy, or, under `--verify`, an
//! overlapping I/O still in flight. A replay that falls behind is marked by the causes that
//! made it: `host_limited` (the replay's figures understate the trace's load), `qd_limited`
//! (the target did not complete I/Os fast enough for the trace's concurrency: what to raise),
//! `overlap_limited` (the verification's one I/O per block in flight held the trace's
//! overlapping I/Os for the target's service time). So the host is blamed only when it was
//! the host.

use serde::{Deserialize, Serialize};

use crate::latency::LatencyUs;

/// The issue lag's p99 a timed replay aims at (µs): the open loop's own bound.
pub const LAG_P99_GOAL_US: f64 = 50.0;

/// Below this share of the target rate a timed replay did not keep up.
pub const RATE_SHARE_GOAL: f64 = 0.99;

/// Timed: the I/Os issued more than [`LAG_P99_GOAL_US`] after their time, by what held them.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct LateIos {
    /// Nothing held them but this host: the stream was not running, or woke late.
    pub host: u64,
    /// They were due while every slot of `qd` was busy.
    pub qd: u64,
    /// Under `--verify`: they waited for an overlapping I/O in flight.
    pub overlap: u64,
}

impl LateIos {
    pub fn total(&self) -> u64 {
        self.host + self.qd + self.overlap
    }
}

/// Reads, writes and trims.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct OpCounts {
    pub read: u64,
    pub write: u64,
    pub trim: u64,
}

impl OpCounts {
    pub fn from_array(a: [u64; 3]) -> OpCounts {
        OpCounts {
            read: a[0],
            write: a[1],
            trim: a[2],
        }
    }

    pub fn total(&self) -> u64 {
        self.read + self.write + self.trim
    }
}

/// One target's replay of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replay {
    /// The trace as named on the command line, and its format (`fio`, `blkparse`, `msr`).
    pub trace: String,
    pub format: String,
    /// `timed` (each I/O at its trace time over `speed`, open loop) or `afap` (as fast as
    /// possible, `qd` in flight).
    pub mode: String,
    /// Time scaling: 2 replays twice as fast as recorded.
    pub speed: f64,
    /// `none`, `scale` or `modulo` (docs/guide: replay).
    pub offset_map: String,
    pub qd: u32,
    /// What the trace holds, per op, and the bytes.
    pub trace_ops: OpCounts,
    pub trace_bytes: OpCounts,
    /// What was issued to this target, per op, and the bytes (every issued I/O, counted at
    /// submission: the result's `ios` counts completions).
    pub replayed_ops: OpCounts,
    pub replayed_bytes: OpCounts,
    /// Every record of the trace was issued (false: stopped, or the time limit came first).
    pub complete: bool,
    /// From the trace's first record to its last, s (its own clock).
    pub trace_seconds: f64,
    /// From the first issue to the last, s.
    pub replay_seconds: f64,
    /// The trace's rate (records after the first over `trace_seconds`), I/Os per second.
    pub recorded_iops: Option<f64>,
    /// Timed: the rate asked of the replay, `recorded_iops` × `speed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_iops: Option<f64>,
    /// The rate issued: I/Os after the first over `replay_seconds`.
    pub achieved_iops: Option<f64>,
    /// Timed: `achieved_iops` / `target_iops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ratio: Option<f64>,
    /// Timed: submission minus intended time, every op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_lag_us: Option<LatencyUs>,
    /// The lag's p99 aimed at ([`LAG_P99_GOAL_US`]).
    pub issue_lag_goal_us: f64,
    /// Timed: I/Os that were due while every slot of `qd` was busy.
    #[serde(default)]
    pub held_by_qd: u64,
    /// Under `--verify`: I/Os that waited for an overlapping I/O still in flight (the
    /// verification never has two I/Os over one block in flight; the trace's order is kept).
    #[serde(default)]
    pub held_by_overlap: u64,
    /// Timed: the slots the trace's rate needs at this target's service time (Little's law:
    /// `target_iops` × the median service time; the median, so that the service times this
    /// host stretched, a stream descheduled between an I/O's submission and its reaping, do
    /// not count). A replay that falls behind is `qd_limited` only when this reaches half of
    /// `qd`: otherwise its I/Os waited for slots only while this host caught up on a backlog
    /// of its own making.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_slots: Option<f64>,
    /// Timed: the I/Os issued more than the goal after their time, by what held them
    /// (absent in documents written before it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_ios: Option<LateIos>,
    /// The replay fell behind the trace's times because of this host.
    pub host_limited: bool,
    /// The replay fell behind because I/Os waited for a free slot of `qd`.
    #[serde(default)]
    pub qd_limited: bool,
    /// Under `--verify`: the replay fell behind because I/Os waited for an overlapping I/O
    /// in flight (the target's service time held them, not this host).
    #[serde(default)]
    pub overlap_limited: bool,
    /// Why a replay is marked, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// FNV-1a (64 bits, hex) over (op index as 1 byte, offset and length as little-endian
    /// u64) of every issued I/O in issue order, offsets as mapped: two replays with the same
    /// digest issued the same I/Os in the same order.
    pub issued_digest: String,
}

impl Replay {
    /// Judges a timed replay's fidelity: sets `host_limited`, `qd_limited`,
    /// `overlap_limited` and `note` from the lag, the rate and what held the late I/Os. An
    /// AFAP replay is never marked.
    pub fn judge(&mut self) {
        let (Some(lag), Some(ratio)) = (&self.issue_lag_us, self.rate_ratio) else {
            return;
        };
        let issued = self.replayed_ops.total().max(1);
        let late_lag = lag.p99 > LAG_P99_GOAL_US;
        let slow = ratio < RATE_SHARE_GOAL;
        if !late_lag && !slow {
            return;
        }
        let what = match (late_lag, slow) {
            (true, true) => format!(
                "issue lag p99 {:.1} µs above the {LAG_P99_GOAL_US} µs goal and {:.1} % of the trace's rate",
                lag.p99,
                ratio * 100.0
            ),
            (true, false) => format!(
                "issue lag p99 {:.1} µs above the {LAG_P99_GOAL_US} µs goal",
                lag.p99
            ),
            _ => format!("{:.1} % of the trace's rate", ratio * 100.0),
        };
        // Slots are wanted because of the target only when its service time makes the trace
        // need that many: otherwise the I/Os waited for slots while this host caught up on a
        // backlog of its own making.
        let needs_slots = self.needed_slots.is_some_and(|n| n >= self.qd as f64 / 2.0);
        // Documents before `late_ios`: the slots held back (`held_by_qd`) or nothing did.
        let late = self.late_ios.unwrap_or(LateIos {
            host: 0,
            qd: self.held_by_qd,
            overlap: 0,
        });
        let (qd, host) = if needs_slots {
            (late.qd, late.host)
        } else {
            (0, late.host + late.qd)
        };
        // A cause with more than 1 % of the I/Os late moves the p99 by itself and is named;
        // when none does (the causes together, or only the rate), the largest is.
        let own = |n: u64| n * 100 > issued;
        let (mut by_overlap, mut by_qd, mut by_host) = (own(late.overlap), own(qd), own(host));
        if !(by_overlap || by_qd || by_host) {
            let most = late.overlap.max(qd).max(host);
            by_overlap = late.overlap > 0 && late.overlap == most;
            by_qd = !by_overlap && qd > 0 && qd == most;
            by_host = !by_overlap && !by_qd;
        }
        let mut why = Vec::new();
        if by_overlap {
            self.overlap_limited = true;
            why.push(format!(
                "{} of {issued} I/Os were late waiting for an overlapping I/O in flight \
                 (--verify keeps one I/O per block in flight: the target's service time held them, not this host)",
                late.overlap
            ));
        }
        if by_qd {
            self.qd_limited = true;
            why.push(format!(
                "{} of {issued} I/Os were late because all {} slots were busy: \
                 the target did not complete them fast enough for the trace's concurrency (raise --qd if it can take more)",
                qd, self.qd
            ));
        }
        if by_host {
            self.host_limited = true;
            // Slots full of a backlog the host made are the host's too: said apart.
            let backlog = host - late.host;
            let how = if backlog > 0 && self.late_ios.is_some() {
                format!(
                    "{} of {issued} I/Os were late with queue slots free, and {backlog} with them full of the backlog \
                     this host fell behind by (the trace needs few slots at this target's service time)",
                    late.host
                )
            } else {
                format!("{host} of {issued} I/Os were late with queue slots free")
            };
            why.push(format!(
                "{how}: this host's limit, not the target's; \
                 the figures understate the trace's load (replay at a lower --speed, or on a less loaded host)"
            ));
        }
        self.note = Some(format!(
            "the replay could not keep up ({what}): {}",
            why.join("; ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(p99: f64, ratio: f64, held: u64, needed: f64) -> Replay {
        Replay {
            replayed_ops: OpCounts {
                read: 1000,
                write: 0,
                trim: 0,
            },
            qd: 4,
            issue_lag_us: Some(LatencyUs {
                p99,
                ..Default::default()
            }),
            rate_ratio: Some(ratio),
            held_by_qd: held,
            needed_slots: Some(needed),
            ..Default::default()
        }
    }

    #[test]
    fn a_replay_on_time_is_not_marked() {
        let mut r = timed(10.0, 0.999, 0, 0.1);
        r.judge();
        assert!(!r.host_limited && !r.qd_limited && r.note.is_none());
    }

    #[test]
    fn lag_with_free_slots_is_the_hosts_and_with_full_slots_the_depths() {
        let mut r = timed(400.0, 0.999, 2, 0.1);
        r.judge();
        assert!(r.host_limited && !r.qd_limited);
        assert!(r.note.unwrap().contains("this host's limit"));
        let mut r = timed(400.0, 0.8, 300, 8.0);
        r.judge();
        assert!(r.qd_limited && !r.host_limited);
        assert!(r.note.unwrap().contains("300 of 1000"));
        // Slots were wanted, but a fast target needs few: the host fell behind and its
        // catching up filled them.
        let mut r = timed(400.0, 0.8, 300, 0.2);
        r.judge();
        assert!(r.host_limited && !r.qd_limited);
        // A slow rate alone marks it too.
        let mut r = timed(5.0, 0.5, 0, 0.1);
        r.judge();
        assert!(r.host_limited);
    }

    #[test]
    fn each_cause_that_made_the_p99_late_is_named_and_only_those() {
        let with = |late: LateIos, needed: f64| {
            let mut r = timed(400.0, 0.999, late.qd, needed);
            r.late_ios = Some(late);
            r.judge();
            r
        };
        // Verified: the late I/Os waited for overlapping ones; the host is not blamed.
        let r = with(
            LateIos {
                host: 3,
                qd: 0,
                overlap: 40,
            },
            0.1,
        );
        assert!(r.overlap_limited && !r.host_limited && !r.qd_limited);
        assert!(r.note.as_deref().unwrap().contains("40 of 1000"));
        assert!(!r.note.unwrap().contains("this host's limit"));
        // Both beyond 1 % of the I/Os: both named.
        let r = with(
            LateIos {
                host: 20,
                qd: 0,
                overlap: 40,
            },
            0.1,
        );
        assert!(r.overlap_limited && r.host_limited);
        // Held by full slots the target needs: the depth's; slots filled by a backlog the
        // host made (the target needs few): the host's.
        let qd = LateIos {
            host: 2,
            qd: 50,
            overlap: 0,
        };
        let r = with(qd, 3.0);
        assert!(r.qd_limited && !r.host_limited && !r.overlap_limited);
        let r = with(qd, 0.2);
        assert!(r.host_limited && !r.qd_limited);
        let note = r.note.unwrap();
        assert!(note.contains("2 of 1000 I/Os were late with queue slots free, and 50 with them full of the backlog"), "{note}");
        // No cause alone over 1 %: the largest is named.
        let r = with(
            LateIos {
                host: 4,
                qd: 0,
                overlap: 6,
            },
            0.1,
        );
        assert!(r.overlap_limited && !r.host_limited);
    }

    #[test]
    fn an_afap_replay_is_never_marked() {
        let mut r = Replay::default();
        r.judge();
        assert!(!r.host_limited && r.note.is_none());
    }
}
