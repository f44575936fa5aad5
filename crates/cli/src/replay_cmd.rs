//! `sanbench replay TRACE TARGET...`: the configuration built (from_args/replay.rs), the
//! session's replay run (session/src/replay.rs), and the document written and printed with
//! each target's replay block: what was replayed and how faithfully.

use sanbench_engine::result::RunDoc;
use sanbench_session::context::Context;
use sanbench_session::error::CliError;

use crate::args::ReplayArgs;

/// The replay block of each target, in lines.
pub fn fidelity(doc: &RunDoc) -> String {
    let mut s = String::new();
    for r in &doc.results {
        let Some(p) = &r.replay else { continue };
        let n = sanbench_engine::units::fmt::num;
        s += &format!(
            "replay of {} ({}, {}{}, offset map {}) on {}\n",
            p.trace,
            p.format,
            p.mode,
            if p.mode == "timed" {
                format!(" x{}", p.speed)
            } else {
                String::new()
            },
            p.offset_map,
            r.target
        );
        s += &format!(
            "  ops     read {} write {} trim {} of {} in the trace{}\n",
            p.replayed_ops.read,
            p.replayed_ops.write,
            p.replayed_ops.trim,
            p.trace_ops.total(),
            if p.complete { "" } else { " (not complete)" }
        );
        let rate = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{}/s", n(v)));
        s += &format!(
            "  rate    recorded {}  asked {}  achieved {}{}\n",
            rate(p.recorded_iops),
            rate(p.target_iops),
            rate(p.achieved_iops),
            p.rate_ratio
                .map_or(String::new(), |x| format!(" ({:.2} %)", x * 100.0))
        );
        if let Some(l) = &p.issue_lag_us {
            s += &format!(
                "  lag     p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs (goal p99 <= {} µs)\n",
                l.p50, l.p99, l.max, p.issue_lag_goal_us
            );
        }
        if let Some(late) = p.late_ios.filter(|l| l.total() > 0) {
            s += &format!(
                "  late    {} I/Os over {} µs: {} with slots free, {} with every slot busy, {} behind an overlapping I/O\n",
                late.total(),
                p.issue_lag_goal_us,
                late.host,
                late.qd,
                late.overlap
            );
        }
        if p.held_by_overlap > 0 {
            s += &format!(
                "  verify  {} I/Os waited for an overlapping I/O in flight\n",
                p.held_by_overlap
            );
        }
        if let Some(note) = &p.note {
            s += &format!("  note    {note}\n");
        }
    }
    s
}

/// `sanbench replay ARGS`.
pub fn run(cx: &Context, a: ReplayArgs) -> Result<(), CliError> {
    let c = crate::from_args::replay::replay(a)?;
    let doc = sanbench_session::replay::execute(cx, &c)?;
    if let Some(path) = &c.json {
        sanbench_session::measure::write_json(&doc, path)?;
    }
    if !c.quiet {
        let width = sanbench_session::fit::width();
        let text = sanbench_session::fit::prose(
            &(crate::output::summary(&doc, width) + &fidelity(&doc)),
            width,
        );
        if c.json.as_deref().is_some_and(|p| p.as_os_str() == "-") {
            eprint!("{text}");
        } else {
            out!("{text}");
        }
    }
    crate::render::verdict(&doc, c.quiet)
}
