//! The coordinating thread's loop: it opens and closes the measured window for the observer,
//! reports progress once a second, collects the streams' intervals (run/collect.rs), and
//! samples every stream's in-flight count at random instants (Poisson, at the rate
//! [`InflightSampler`] chooses), so that the mean outstanding I/Os of the Little's-law check is a
//! time average measured independently of the latency timestamps (PASTA: Poisson arrivals see
//! time averages).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::collect::Collector;
use super::inflight::InflightSampler;
use super::shared::{Live, Shared};
use super::sync::PhaseSync;
use super::{Observer, Progress, RunError};

/// How often a synchronized run asks whether the window has ended, once its own end is near
/// (the delay between the deciding process's end and this one's).
const SYNC_POLL_NS: u64 = 200_000;

/// `window`: the ramp's end and the window's end (ns since the start).
pub(super) fn coordinate(
    (ramp_ns, end_ns): (u64, u64),
    shared: &Shared,
    lives: &[Arc<Live>],
    observer: &dyn Observer,
    seed: u64,
    sync: Option<&dyn PhaseSync>,
    intervals: &mut Collector<'_>,
) -> InflightSampler {
    let Some(clock) = shared.clock.get() else {
        return InflightSampler::new(0, lives.len(), 0, 1);
    };
    // The ramp's samples teach the schedule how much the counts move; the window's count.
    let mut samples = InflightSampler::new(
        seed ^ 0x5a3b1e,
        lives.len(),
        0,
        end_ns.saturating_sub(ramp_ns),
    );
    let mut in_window = ramp_ns == 0;
    if in_window {
        observer.window_started();
    }
    let mut last_tick = 0u64;
    let (mut last_ios, mut last_bytes) = (0u64, 0u64);
    loop {
        let now = clock.now_ns();
        if shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let stopped = shared.stop.load(Ordering::Relaxed);
        if !in_window && now >= ramp_ns && !stopped {
            in_window = true;
            observer.window_started();
        }
        match sync {
            // A replay's last stream moves the end up when its trace is done.
            None if stopped || now >= end_ns.min(shared.end_at.load(Ordering::Relaxed)) => break,
            None => {}
            Some(s) => match s.end_now(stopped || now >= end_ns) {
                Ok(true) => {
                    // The window ends here for every stream of this process.
                    shared.end_at.store(clock.now_ns(), Ordering::Relaxed);
                    break;
                }
                Ok(false) => {}
                Err(error) => {
                    shared.fail(RunError {
                        target: "synchronized run".into(),
                        worker: 0,
                        error,
                    });
                    break;
                }
            },
        }
        intervals.poll(None);
        if now >= samples.next_at() {
            let counts = lives.iter().map(|l| l.inflight.load(Ordering::Relaxed));
            samples.record(now, counts, in_window);
        }
        if now - last_tick >= 1_000_000_000 {
            let ios: u64 = lives.iter().map(|l| l.ios.load(Ordering::Relaxed)).sum();
            let bytes: u64 = lives.iter().map(|l| l.bytes.load(Ordering::Relaxed)).sum();
            let dt = (now - last_tick) as f64 / 1e9;
            observer.progress(&Progress {
                elapsed: Duration::from_nanos(now),
                ramping: now < ramp_ns,
                remaining: Duration::from_nanos(end_ns.saturating_sub(now)),
                iops: (ios - last_ios) as f64 / dt,
                bytes_per_s: (bytes - last_bytes) as f64 / dt,
            });
            last_tick = now;
            last_ios = ios;
            last_bytes = bytes;
        }
        let next_event = if in_window { end_ns } else { ramp_ns };
        // Short intervals are collected as often as they end, so few wait in the channel
        // and the pool hands the streams emptied ones instead of new allocations.
        let poll_ns = intervals.len_ns.clamp(1_000_000, 50_000_000);
        let max_sleep = match sync {
            // The deciding process may end a little before this one's own end: poll often
            // from shortly before it.
            Some(_) if now + 50_000_000 >= end_ns || stopped => SYNC_POLL_NS,
            _ => poll_ns,
        };
        let sleep_ns = next_event
            .saturating_sub(now)
            .min(last_tick + 1_000_000_000 - now.min(last_tick + 1_000_000_000))
            .min(samples.next_at().saturating_sub(now))
            .clamp(20_000.min(max_sleep), max_sleep);
        let sleep_ns = match sync {
            Some(_) if now >= end_ns || stopped => SYNC_POLL_NS,
            _ => sleep_ns,
        };
        thread::sleep(Duration::from_nanos(sleep_ns));
    }
    if in_window {
        observer.window_ended();
    }
    samples
}
