//! `sanbench verify TARGET`: reads a whole span back and checks every unit a sanbench run
//! wrote (the engine's verify::pass does the reading; this is flags, output and exit code 3).

use std::time::Instant;

use anyhow::Context as _;
use sanbench_engine::verify::{self, pass, Checker, Strict, Verifier, VerifyReport};
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{usage, CliError};
use crate::events::Event;
use crate::progress::ProgressMode;

pub const VERIFY_SCHEMA: &str = "sanbench.verify/1";

/// The document `--json` writes.
#[derive(Debug, Serialize, Deserialize)]
pub struct VerifyDoc {
    pub schema: String,
    pub sanbench_version: String,
    /// The run whose data was expected (hex), when one was given.
    pub run_id: Option<String>,
    pub targets: Vec<TargetVerify>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct TargetVerify {
    pub target: String,
    pub span: u64,
    pub seconds: f64,
    pub verify: VerifyReport,
}

fn parse_run_id(s: &str) -> Result<u64, CliError> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| {
        usage(format!(
            "--run-id {s}: not a run id (16 hex digits, as in a result's run_id)"
        ))
    })
}

/// Everything one `verify` needs, typed.
pub struct VerifyConfig {
    pub targets: Vec<String>,
    /// The run whose data is expected (`--run-id`).
    pub run_id: Option<u64>,
    /// How much of each target to read (`None`: all of it).
    pub span: Option<u64>,
    /// The size of each read, above 0.
    pub bs: u64,
    /// Reads in flight, above 0.
    pub qd: u32,
    pub files: sanbench_engine::file::FileOptions,
    pub io_timeout: std::time::Duration,
    /// `--verify-state FILE`: the map a verified run left.
    pub verify_state: Option<std::path::PathBuf>,
    /// `--json FILE` (`-`: stdout).
    pub json: Option<std::path::PathBuf>,
    pub quiet: bool,
}

impl VerifyConfig {
    /// `--run-id HEX` as the configuration holds it.
    pub fn parse_run_id(s: &str) -> Result<u64, CliError> {
        parse_run_id(s)
    }
}

impl VerifyDoc {
    /// `Ok` when every target verified; the error (exit 3) names the targets that did not.
    pub fn outcome(&self) -> Result<(), CliError> {
        unverified(self.targets.iter().map(|t| (t.target.as_str(), &t.verify)))
    }
}

/// `Ok` when every target's report is clean; the error (exit 3) names each target with bad
/// blocks and how many.
pub fn unverified<'a>(
    reports: impl IntoIterator<Item = (&'a str, &'a VerifyReport)>,
) -> Result<(), CliError> {
    let bad: Vec<String> = reports
        .into_iter()
        .filter(|(_, v)| v.bad_total() > 0)
        .map(|(t, v)| format!("{t}: {} bad blocks", v.bad_total()))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(CliError::Unverified(format!(
        "data did not verify: {}",
        bad.join("; ")
    )))
}

/// Reads back every target `a` names and checks each unit; the document says what was found
/// (it is written to `--json` too). Bad data is not an error here: [`VerifyDoc::outcome`].
pub fn execute(cx: &Context, a: &VerifyConfig) -> Result<VerifyDoc, CliError> {
    let (run_id, span, bs, opts, timeout) = (a.run_id, a.span, a.bs, &a.files, a.io_timeout);
    if bs == 0 || a.qd == 0 {
        return Err(usage("--bs and --qd must be above 0"));
    }
    if let Some(path) = &a.json {
        crate::outfile::check_writable("--json", path)?;
    }
    let targets = crate::targets::open_targets(cx, &a.targets, opts)?;
    let progress = cx.events(a.quiet, ProgressMode::Auto, true);
    let stop = crate::signals::stop_flag();
    let mut doc = VerifyDoc {
        schema: VERIFY_SCHEMA.into(),
        sanbench_version: env!("CARGO_PKG_VERSION").into(),
        run_id: run_id.map(|id| format!("{id:016x}")),
        targets: Vec::new(),
    };
    let state = match &a.verify_state {
        Some(path) => {
            if targets.len() != 1 {
                return Err(usage(
                    "--verify-state holds the map of one target: give one",
                ));
            }
            Some(Verifier::open_state(path)?)
        }
        None => None,
    };
    if let Some(v) = &state {
        doc.run_id = Some(format!("{:016x}", v.run_id));
    }
    for t in &targets {
        let info = t.info();
        let mut span = span.unwrap_or(info.size).min(info.size);
        let unit = verify::unit_for(info.block_size);
        let (mut checker, mut rep) = match &state {
            // Blocks the session never wrote predate it: only their consistency is checked.
            Some(v) => {
                if v.span > info.size {
                    return Err(usage(format!(
                        "{}: the verification state covers {} bytes, the target has {}",
                        info.uri, v.span, info.size
                    )));
                }
                span = span.min(v.span);
                let c = Checker::new(v.run_id, v.unit, v.granule(), Strict::No, false);
                (c, v.report())
            }
            None => (
                Checker::new(
                    run_id.unwrap_or(0),
                    unit,
                    unit as u64,
                    Strict::Stamped(run_id),
                    false,
                ),
                VerifyReport {
                    unit,
                    granule: unit as u64,
                    ..VerifyReport::default()
                },
            ),
        };
        let t0 = Instant::now();
        let r = pass::verify_span(
            &**t,
            span,
            bs,
            a.qd,
            &mut checker,
            state.as_ref().map(|v| &v.map),
            &mut rep,
            timeout,
            &stop,
            &mut |done, total| {
                progress.event(&Event::Fill {
                    target: &info.uri,
                    done,
                    total,
                })
            },
        );
        progress.event(&Event::Ended);
        r.map_err(|e| CliError::Failed(anyhow::anyhow!("{}: {e}", info.uri)))?;
        if !a.quiet || rep.bad_total() > 0 {
            eprintln!("{}: {}", info.uri, rep.summary());
        }
        for b in rep.bad_blocks.iter().take(if a.quiet { 0 } else { 20 }) {
            eprintln!("  {}", bad_block_line(b));
        }
        doc.targets.push(TargetVerify {
            target: sanbench_engine::uri::redact(&info.uri),
            span,
            seconds: t0.elapsed().as_secs_f64(),
            verify: rep,
        });
    }
    if let Some(path) = &a.json {
        let text = sanbench_doc::json::to_string(&doc).context("serializing the findings")?;
        if path.as_os_str() == "-" {
            crate::stdout::write_bytes(format!("{text}\n").as_bytes());
        } else {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(doc)
}

/// One bad block in a line: "0x1000 stale or lost write: expected gen 3 of run …, found gen 2
/// (worker 0, seq 17) [a1b2…]".
pub fn bad_block_line(b: &sanbench_engine::verify::BadBlock) -> String {
    let exp = b
        .expected
        .as_ref()
        .map_or("unknown content".to_string(), |e| {
            format!("expected gen {} of run {}", e.generation, e.run_id)
        });
    let found = match &b.found {
        Some(f) if f.offset != b.offset => format!(
            "found the stamp of offset {:#x} (gen {}, run {})",
            f.offset, f.generation, f.run_id
        ),
        Some(f) => format!("found gen {} of run {}", f.generation, f.run_id),
        None => "no valid stamp".to_string(),
    };
    format!(
        "{:#x} {}: {exp}, {found} [{}] (read {:#x}+{})",
        b.offset,
        b.class.label(),
        &b.excerpt[..b.excerpt.len().min(32)],
        b.io_offset,
        b.io_len
    )
}
