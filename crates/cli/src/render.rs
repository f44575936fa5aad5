//! What the binary prints of a finished command: a run's summary and verification verdict,
//! a comparison's table, rounds, Key Findings and replication, the files written. The
//! session returns the typed results; this renders them.

use sanbench_engine::result::RunDoc;
use sanbench_report::{Options, Report};
use sanbench_session::compare::Compared;
use sanbench_session::error::CliError;
use sanbench_session::run_config::RunConfig;
use sanbench_store::Comparison;

/// Prints and writes a finished run's document (the process that reports: the only one, or
/// rank 0), and its exit code for data that did not verify.
pub fn run(c: &RunConfig, doc: &RunDoc) -> Result<(), CliError> {
    if let Some(path) = &c.json {
        sanbench_session::measure::write_json(doc, path)?;
    }
    let to_stdout = c.json_to_stdout();
    if !c.quiet {
        let width = sanbench_session::fit::width();
        let s = sanbench_session::fit::prose(&crate::output::summary(doc, width), width);
        if to_stdout {
            eprint!("{s}");
        } else {
            out!("{s}");
        }
    }
    verdict(doc, c.quiet)
}

/// Prints each verified target's summary and its first bad blocks; the error (exit code 3)
/// when any block did not verify.
pub fn verdict(doc: &sanbench_engine::result::RunDoc, quiet: bool) -> Result<(), CliError> {
    for r in &doc.results {
        let Some(v) = &r.verify else { continue };
        if !quiet || v.bad_total() > 0 {
            eprintln!("{}: {}", r.target, v.summary());
        }
        for b in v.bad_blocks.iter().take(if quiet { 0 } else { 5 }) {
            eprintln!("  {}", sanbench_session::verify_cmd::bad_block_line(b));
        }
    }
    sanbench_session::verify_cmd::unverified(
        doc.results
            .iter()
            .filter_map(|r| Some((r.target.as_str(), r.verify.as_ref()?))),
    )
}

/// A finished comparison (on the process that reports; `None` elsewhere prints nothing): the
/// table unless `quiet`, the rounds, the Key Findings, the replication of `--against`, the
/// files written and where it was recorded; then its outcome.
pub fn compared(c: Option<Compared>, quiet: bool) -> Result<(), CliError> {
    let Some(c) = c else { return Ok(()) };
    let width = sanbench_session::fit::width();
    if !quiet {
        out!("{}", crate::output::compare_table(&c.cmp, width));
    }
    outln!();
    if let Some(d) = &c.cmp.design {
        let rounds = sanbench_report::findings::rounds_text(d);
        outln!("{}", sanbench_session::fit::wrap(&rounds, width, "", "  "));
    }
    print_findings(&c.cmp);
    if let Some((id, run)) = &c.against {
        outln!();
        print_replication(run, &format!("run {id}"), &c.cmp, "this run");
    }
    outln!();
    for f in &c.files {
        outln!("wrote {}", f.display());
    }
    if let Some((run, path)) = &c.recorded {
        outln!("recorded as run {run} in {}", path.display());
    }
    c.outcome()
}

/// The replication table: each finding (and decided throughput question) of `a`, and what `b`
/// says about it.
pub fn print_replication(a: &Comparison, a_name: &str, b: &Comparison, b_name: &str) {
    let options = Options::default();
    let (ra, rb) = (Report::new(a, &options), Report::new(b, &options));
    let r = sanbench_report::replication::replicate(&ra, &rb);
    outln!("Findings of {a_name} in {b_name}:");
    out!(
        "{}",
        sanbench_report::replication::render_text(&r, a_name, b_name)
    );
}

/// The Key Findings, as the studies printed them: the strongest two of each kind on the
/// terminal (the report's first two of each label), every one of them in the report.
pub fn print_findings(cmp: &Comparison) {
    let report = Report::new(cmp, &Options::default());
    let width = sanbench_session::fit::width();
    for c in &report.caveats {
        outln!(
            "{}",
            sanbench_session::fit::wrap(&format!("warning: {c}"), width, "", "  ")
        );
    }
    for l in sanbench_report::block_layer::lines(&report.block_layer) {
        outln!(
            "{}",
            sanbench_session::fit::wrap(&format!("block layer: {l}"), width, "", "  ")
        );
    }
    if report.findings.is_empty() {
        let none = format!("Key Findings: {}", report.none_text());
        outln!("{}", sanbench_session::fit::wrap(&none, width, "", "  "));
        return;
    }
    outln!("Key Findings:");
    let head = sanbench_report::findings::headline(&report.findings, 2);
    let shown: Vec<crate::findings_out::Shown> = head
        .iter()
        .map(|f| crate::findings_out::Shown {
            text: f.text.clone(),
            note: sanbench_report::headroom::finding_note(cmp, f),
        })
        .collect();
    out!("{}", crate::findings_out::render(&shown, width));
    let shown = head.len();
    if shown < report.findings.len() {
        outln!(
            "  ({} more in report.html and report.md)",
            report.findings.len() - shown
        );
    }
}
