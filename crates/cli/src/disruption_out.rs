//! The run summary's lines for multipath targets (what each path carried) and for a
//! disruption (a fault fired, or a stall seen): `output::summary` appends them.

use std::fmt::Write;

use sanbench_engine::disruption::Disruption;
use sanbench_engine::multipath::report::MultipathReport;
use sanbench_engine::result::TargetResult;

use sanbench_units::fmt::si;

fn ms(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{v:.0} ms")
    }
}

/// Every line for one target (empty when it is neither multipath nor disrupted).
pub fn lines(r: &TargetResult) -> String {
    let mut out = String::new();
    if let Some(m) = &r.multipath {
        paths(&mut out, &r.target, m);
    }
    if let Some(d) = &r.disruption {
        disruption(&mut out, &r.target, d);
    }
    out
}

fn paths(out: &mut String, target: &str, m: &MultipathReport) {
    let _ = writeln!(
        out,
        "paths of {target}: {}, failback {}; {} I/Os reissued, {} failed with no path",
        m.policy, m.failback, m.reissued, m.failed_no_path
    );
    let total: u64 = m.paths.iter().map(|p| p.ios).sum::<u64>().max(1);
    for (i, p) in m.paths.iter().enumerate() {
        let _ = writeln!(
            out,
            "  path {i} {}: {} I/Os ({:.0} %), {:.1} MB, latency mean {} max {}{}",
            p.uri,
            p.ios,
            100.0 * p.ios as f64 / total as f64,
            p.bytes as f64 / 1e6,
            p.latency_mean_us
                .map_or("-".into(), |v| format!("{v:.0} µs")),
            p.latency_max_us.map_or("-".into(), |v| ms(v / 1000.0)),
            if p.failures + p.reinstatements > 0 {
                format!("; failed {}x, reinstated {}x", p.failures, p.reinstatements)
            } else {
                String::new()
            }
        );
    }
}

fn disruption(out: &mut String, target: &str, d: &Disruption) {
    let mut parts = Vec::new();
    for e in d.events.iter().filter(|e| e.event == "fault") {
        parts.push(format!(
            "{} {} at {}",
            e.link.as_deref().unwrap_or("?"),
            e.detail.as_deref().unwrap_or("?"),
            ms(e.offset_ms)
        ));
    }
    let cause = (d.cause == "path")
        .then(|| {
            d.events.iter().find(|e| {
                e.path.is_some() && sanbench_engine::disruption::PATH_CAUSES.contains(&&*e.event)
            })
        })
        .flatten();
    let mut text = if let Some(e) = cause {
        format!(
            "no fault fired; path {} {} at {} by itself",
            e.path.unwrap_or(0),
            e.event,
            ms(e.offset_ms)
        )
    } else if parts.is_empty() {
        "no fault fired".to_string()
    } else {
        format!("fault {}", parts.join(", "))
    };
    if let Some(v) = d.detected_ms {
        let _ = write!(text, "; detected +{}", ms(v));
    }
    if let Some(v) = d.failover_ms {
        let _ = write!(text, ", failed over +{}", ms(v));
    }
    if d.stall_ms > 0.0 {
        let _ = write!(
            text,
            "; longest stall {} at {}",
            ms(d.stall_ms),
            ms(d.stall_start_ms)
        );
    } else {
        text.push_str("; no span of 10 ms without a completion");
    }
    let _ = write!(text, "; worst latency {}", ms(d.worst_latency_ms));
    if d.reissued + d.failed > 0 {
        let _ = write!(text, "; {} I/Os reissued, {} failed", d.reissued, d.failed);
    }
    match (d.pre_fault_iops, d.recovered_ms) {
        (Some(pre), Some(back)) => {
            let _ = write!(
                text,
                "; back within 10 % of {} IOPS after {}",
                si(pre),
                ms(back)
            );
        }
        (Some(pre), None) => {
            let _ = write!(
                text,
                "; not back within 10 % of {} IOPS before the window ended{}",
                si(pre),
                d.degraded_ratio
                    .map_or(String::new(), |r| format!(" (held {r:.2}x)"))
            );
        }
        _ => {}
    }
    let _ = writeln!(out, "disruption on {target}: {text}");
    if let Some(c) = &d.catch_up {
        let _ = writeln!(
            out,
            "  catch-up: {} I/Os delayed by the stall; peak {} IOPS against {} offered; {}",
            c.ios,
            si(c.peak_iops),
            si(c.offered_iops),
            c.drained_ms
                .map_or("the backlog was not drained in the window".into(), |v| {
                    format!("backlog drained {} after the stall", ms(v))
                })
        );
    }
    if let (Some(reads), Some(bad)) = (d.verified_reads, d.bad_blocks) {
        let _ = writeln!(
            out,
            "  verify: {reads} reads checked; {}",
            if bad == 0 {
                "no acknowledged write lost".to_string()
            } else {
                format!("{bad} bad blocks (see verify)")
            }
        );
    }
}
