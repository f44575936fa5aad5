//! `sanbench suite list` and `sanbench suite show NAME`.

use sanbench_engine::suite;
use sanbench_engine::units::format_size;

use crate::args::SuiteCommand;
use sanbench_session::error::{usage, CliError};

pub fn run(cmd: SuiteCommand) -> Result<(), CliError> {
    match cmd {
        SuiteCommand::List => {
            for name in suite::builtin_names() {
                let s = suite::load(name).map_err(usage)?;
                let mins = s.duration(1).as_secs_f64() / 60.0;
                outln!(
                    "{name:<20} {:>3} workloads, {:>6.1} min per target  {}",
                    s.workloads.len(),
                    mins,
                    s.description
                );
            }
            Ok(())
        }
        SuiteCommand::Show { name, fio: true } => {
            let s = suite::load(&name).map_err(usage)?;
            out!("{}", crate::fio_cmd::suite_text(&s)?);
            Ok(())
        }
        SuiteCommand::Show { name, fio: false } => {
            let s = suite::load(&name).map_err(usage)?;
            outln!("{}: {}", s.name, s.description);
            if let Some(src) = &s.source {
                outln!("source: {src}");
            }
            outln!(
                "{:<28} {:<10} {:>5} {:>4} {:>8} {:>7}  access specification",
                "id",
                "group",
                "qd",
                "wkr",
                "ramp+time",
                "targets"
            );
            for w in &s.workloads {
                let wl = &w.workload;
                let segs: Vec<String> = match &w.trace {
                    Some(t) => vec![format!(
                        "trace {} ({}, offset map {})",
                        t.trace,
                        if t.afap {
                            "afap".to_string()
                        } else {
                            format!("timed x{}", t.speed)
                        },
                        t.offset_map
                    )],
                    None => wl
                        .segments
                        .iter()
                        .map(|sg| {
                            let mut d = sg.describe();
                            if wl.segments.len() > 1 {
                                d = format!("w{} {d}", sg.weight);
                            }
                            d
                        })
                        .collect(),
                };
                outln!(
                    "{:<28} {:<10} {:>5} {:>4} {:>4.0}+{:<4.0} {:>7}  {}{}",
                    w.id,
                    w.group,
                    wl.qd,
                    wl.workers,
                    wl.ramp.as_secs_f64(),
                    wl.time.as_secs_f64(),
                    format!(
                        "x{}{}",
                        w.targets_at_once.unwrap_or(1),
                        w.paths.map(|p| format!(" p{p}")).unwrap_or_default()
                    ),
                    segs.join(" + "),
                    wl.span
                        .map(|s| format!(" (span {})", format_size(s)))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
    }
}
