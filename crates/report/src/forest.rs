//! The forest plot: every question's ratio with its simultaneous interval, one row per
//! workload and pair, on a log axis.
//!
//! A log axis because ratios are: 2x and 0.5x are the same distance from 1, and the margin
//! (`--min-effect`, ± 10 %) is the band from 1/1.1 to 1.1, symmetric there. Ratios are
//! oriented so that right of 1 favours the pair's first target on every figure (for p99
//! latency: b's over a's), as the verdicts are stated from a's side. The plot is hand-written
//! SVG like [`crate::svg`], for the same reasons; the verdict is said in words beside every
//! row and in its `<title>`, so colour and marker are never the only carrier.

use std::fmt::Write as _;

use sanbench_doc::Question;

use crate::findings::{fmt_interval, fmt_ratio};
use crate::fmt::html as esc;
use crate::questions::{metric_of, oriented_ratio};
use sanbench_units::fmt::short;

/// The widest axis: beyond 64x either way a ratio is drawn as an arrow to the edge (such a
/// range would squeeze every other row into a few pixels).
const MAX_EXP: i32 = 6;
const ROW: f64 = 20.0;
const HEAD: f64 = 22.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 42.0;
const PLOT_W: f64 = 360.0;
/// Width of a character of the 11 px labels, generous so that names are never clipped.
const CHAR_W: f64 = 6.6;

/// One row: a question of one workload.
pub struct ForestRow {
    /// The workload's title, shown once above its rows.
    pub group: String,
    /// "A / B", with the figure for secondary questions.
    pub label: String,
    /// Oriented ratio and interval (`None`: unbounded).
    pub ratio: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// "better", "worse", "equivalent" or "inconclusive", from a's side.
    pub verdict: String,
    /// The text column: "1.8x [1.5-2.2] better".
    pub text: String,
    /// The row's accessible description.
    pub tip: String,
}

/// Rows for the questions of one family, in the comparison's workload order.
pub fn rows(cmp: &sanbench_doc::Comparison, family: &str, qs: &[Question]) -> Vec<ForestRow> {
    let mut out = Vec::new();
    for w in &cmp.workloads {
        for q in qs
            .iter()
            .filter(|q| q.family == family && q.workload == w.id)
        {
            let (ratio, low, high) = oriented_ratio(q);
            let figure = metric_of(q).map_or(q.metric.as_str(), |m| m.label());
            let label = if family == "primary" {
                format!("{} / {}", q.a, q.b)
            } else {
                format!("{} / {} · {figure}", q.a, q.b)
            };
            let mut text = format!(
                "{} {} {}",
                fmt_ratio(ratio),
                fmt_interval(low, high),
                q.verdict
            );
            if let Some(m) = q.more_rounds.filter(|_| q.verdict == "inconclusive") {
                let _ = write!(text, " (~{m} more rounds)");
            }
            let unbounded = if low.is_none() {
                "; interval unbounded (too few rounds)"
            } else {
                ""
            };
            let tip = format!(
                "{}: {} vs {}, {figure}: {text}{unbounded}; {} rounds",
                w.title, q.a, q.b, q.rounds
            );
            out.push(ForestRow {
                group: w.title.clone(),
                label,
                ratio,
                low,
                high,
                verdict: q.verdict.clone(),
                text,
                tip,
            });
        }
    }
    out
}

/// The x axis: ratios from `lo` to `hi` (powers of two) over pixels `x0` to `x1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogAxis {
    pub lo: f64,
    pub hi: f64,
    pub x0: f64,
    pub x1: f64,
}

impl LogAxis {
    /// Powers of two around every finite value, 1 and the margin, within 2^±[`MAX_EXP`].
    pub fn fit(values: impl Iterator<Item = f64>, margin: f64, x0: f64, x1: f64) -> LogAxis {
        let (mut lo, mut hi) = (1.0 / (1.0 + margin), 1.0 + margin);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let cap = |e: f64| (e as i32).clamp(-MAX_EXP, MAX_EXP);
        LogAxis {
            lo: 2f64.powi(cap(lo.log2().floor())),
            hi: 2f64.powi(cap(hi.log2().ceil())),
            x0,
            x1,
        }
    }

    /// The pixel of a ratio, clamped to the axis.
    pub fn x(&self, r: f64) -> f64 {
        let t = (r.max(1e-300).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.x0 + t.clamp(0.0, 1.0) * (self.x1 - self.x0)
    }

    fn inside(&self, r: f64) -> bool {
        r.is_finite() && r >= self.lo && r <= self.hi
    }

    /// Tick values: every power of two, or every second one when that would crowd the axis.
    pub fn ticks(&self) -> Vec<f64> {
        let (a, b) = (self.lo.log2().round() as i32, self.hi.log2().round() as i32);
        let step = if b - a > 8 { 2 } else { 1 };
        (a..=b)
            .filter(|e| e.rem_euclid(step) == 0)
            .map(|e| 2f64.powi(e))
            .collect()
    }
}

fn colour(verdict: &str) -> &'static str {
    match verdict {
        "better" => "#1b7a3e",
        "worse" => "#b3261e",
        "equivalent" => "#0b5cad",
        _ => "#6b7380",
    }
}

/// The marker of a verdict: filled circle for a difference, diamond for equivalence, hollow
/// circle for inconclusive.
fn marker(s: &mut String, verdict: &str, x: f64, y: f64) {
    let c = colour(verdict);
    let _ = match verdict {
        "better" | "worse" => write!(
            s,
            r#"<circle class="ratio" cx="{x:.2}" cy="{y:.1}" r="4.5" fill="{c}"/>"#
        ),
        "equivalent" => write!(
            s,
            r#"<path class="ratio" data-x="{x:.2}" d="M{x:.2} {:.1}l5 5l-5 5l-5 -5z" fill="{c}"/>"#,
            y - 5.0
        ),
        _ => write!(
            s,
            r##"<circle class="ratio" cx="{x:.2}" cy="{y:.1}" r="4" fill="#fff" stroke="{c}" stroke-width="1.8"/>"##
        ),
    };
}

/// An arrowhead at `x` pointing left (`dir` -1) or right (+1).
fn arrow(s: &mut String, x: f64, y: f64, dir: f64, c: &str) {
    let _ = write!(
        s,
        r#"<path class="arrow" d="M{x:.2} {y:.1}l{:.1} -4v8z" fill="{c}"/>"#,
        -7.0 * dir
    );
}

/// The forest plot of some rows; `min_effect` is the margin drawn around 1.
pub fn forest_plot(title: &str, axis_label: &str, rows: &[ForestRow], min_effect: f64) -> String {
    let chars = |s: &str| s.chars().count() as f64;
    let label_w = rows
        .iter()
        .map(|r| 24.0 + CHAR_W * chars(&r.label))
        .fold(160.0, f64::max);
    let text_w = rows
        .iter()
        .map(|r| 16.0 + CHAR_W * chars(&r.text))
        .fold(120.0, f64::max);
    let (x0, x1) = (label_w + 10.0, label_w + 10.0 + PLOT_W);
    let axis = LogAxis::fit(
        rows.iter()
            .flat_map(|r| [Some(r.ratio), r.low, r.high])
            .flatten(),
        min_effect,
        x0,
        x1,
    );
    let mut groups = 0;
    for (i, r) in rows.iter().enumerate() {
        if i == 0 || rows[i - 1].group != r.group {
            groups += 1;
        }
    }
    let plot_h = rows.len() as f64 * ROW + groups as f64 * HEAD;
    let w = (x1 + 14.0 + text_w).max(TOP + CHAR_W * 1.2 * chars(title));
    let h = TOP + plot_h + BOTTOM;
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg class="chart forest" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" xmlns="http://www.w3.org/2000/svg"><title>{t}</title><text class="chart-title" x="8" y="18">{t}</text><text class="axis-label" x="{x1:.1}" y="36" text-anchor="end">{a}</text>"##,
        t = esc(title),
        a = esc(axis_label)
    );
    // The margin band and the line of no difference, under the rows.
    let (m0, m1) = (axis.x(1.0 / (1.0 + min_effect)), axis.x(1.0 + min_effect));
    let bottom = TOP + plot_h;
    let _ = write!(
        s,
        r##"<rect class="margin" x="{m0:.2}" y="{TOP}" width="{:.2}" height="{plot_h:.1}" fill="#e8eef6"><title>within ± {} % (the equivalence margin)</title></rect><line class="one" x1="{o:.2}" x2="{o:.2}" y1="{TOP}" y2="{bottom:.1}" stroke="#1d2330" stroke-width="1.2"/>"##,
        m1 - m0,
        short(min_effect * 100.0),
        o = axis.x(1.0)
    );
    for t in axis.ticks() {
        let x = axis.x(t);
        let _ = write!(
            s,
            r##"<line class="tick-mark" data-value="{v}" x1="{x:.2}" x2="{x:.2}" y1="{TOP}" y2="{:.1}" stroke="#eceef1"/><text class="tick" x="{x:.2}" y="{:.1}" text-anchor="middle">{v}</text>"##,
            bottom + 4.0,
            bottom + 16.0,
            v = short(t)
        );
    }
    let _ = write!(
        s,
        r##"<line class="axis" x1="{x0:.1}" x2="{x1:.1}" y1="{bottom:.1}" y2="{bottom:.1}"/><text class="tick" x="{:.2}" y="{:.1}" text-anchor="middle">± {} % margin shaded · log scale</text>"##,
        (x0 + x1) / 2.0,
        bottom + 32.0,
        short(min_effect * 100.0)
    );
    let mut y = TOP;
    for (i, r) in rows.iter().enumerate() {
        if i == 0 || rows[i - 1].group != r.group {
            let _ = write!(
                s,
                r#"<text class="group-title" x="8" y="{:.1}">{}</text>"#,
                y + 15.0,
                esc(&r.group)
            );
            y += HEAD;
        }
        let cy = y + ROW / 2.0;
        let c = colour(&r.verdict);
        let _ = write!(
            s,
            r#"<g class="q" data-verdict="{}" data-ratio="{}"><title>{}</title><text class="legend" x="24" y="{:.1}">{}</text>"#,
            esc(&r.verdict),
            r.ratio,
            esc(&r.tip),
            cy + 4.0,
            esc(&r.label)
        );
        // The interval: to the axis edge with an arrowhead where it is unbounded or leaves
        // the axis.
        let lo = r.low.filter(|v| v.is_finite() && *v > 0.0);
        let hi = r.high.filter(|v| v.is_finite() && *v > 0.0);
        let (xl, xh) = (
            lo.map_or(axis.x0, |v| axis.x(v)),
            hi.map_or(axis.x1, |v| axis.x(v)),
        );
        let _ = write!(
            s,
            r#"<line class="ci" x1="{xl:.2}" x2="{xh:.2}" y1="{cy:.1}" y2="{cy:.1}" stroke="{c}" stroke-width="2"/>"#
        );
        if !lo.is_some_and(|v| axis.inside(v)) {
            arrow(&mut s, axis.x0, cy, -1.0, c);
        }
        if !hi.is_some_and(|v| axis.inside(v)) {
            arrow(&mut s, axis.x1, cy, 1.0, c);
        }
        if r.ratio.is_finite() && r.ratio > 0.0 {
            marker(&mut s, &r.verdict, axis.x(r.ratio), cy);
        }
        let _ = write!(
            s,
            r#"<text class="verdict" x="{:.1}" y="{:.1}" style="fill:{c}">{}{}</text></g>"#,
            x1 + 14.0,
            cy + 4.0,
            esc(&r.text),
            if lo.is_none() || hi.is_none() {
                " (unbounded)"
            } else {
                ""
            }
        );
        y += ROW;
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ratio: f64, low: Option<f64>, high: Option<f64>, verdict: &str) -> ForestRow {
        ForestRow {
            group: "w".into(),
            label: "A / B".into(),
            ratio,
            low,
            high,
            verdict: verdict.into(),
            text: format!("{ratio} {verdict}"),
            tip: "tip".into(),
        }
    }

    #[test]
    fn the_axis_is_logarithmic_and_holds_the_margin() {
        let a = LogAxis::fit([1.8, 2.2, 0.3].into_iter(), 0.10, 100.0, 500.0);
        assert_eq!((a.lo, a.hi), (0.25, 4.0));
        assert!((a.x(2.0) - (a.x(1.0) + a.x(4.0)) / 2.0).abs() < 1e-9);
        assert!((a.x(0.5) - (a.x(0.25) + a.x(1.0)) / 2.0).abs() < 1e-9);
        assert_eq!(a.ticks(), vec![0.25, 0.5, 1.0, 2.0, 4.0]);
        // Nothing but 1 and the margin: one power of two either side.
        let b = LogAxis::fit(std::iter::empty(), 0.10, 0.0, 1.0);
        assert_eq!((b.lo, b.hi), (0.5, 2.0));
        // Huge values are capped; the ticks thin out.
        let c = LogAxis::fit([1e9, 1e-9].into_iter(), 0.10, 0.0, 1.0);
        assert_eq!((c.lo, c.hi), (1.0 / 64.0, 64.0));
        assert_eq!(c.ticks().len(), 7);
        assert_eq!(c.x(1e9), 1.0);
    }

    #[test]
    fn unbounded_intervals_are_arrows_and_say_so() {
        let svg = forest_plot(
            "t",
            "x",
            &[
                row(1.3, None, None, "inconclusive"),
                row(2.0, Some(1.5), Some(2.5), "better"),
            ],
            0.10,
        );
        assert_eq!(svg.matches(r#"<g class="q""#).count(), 2);
        // Both ends of the unbounded row, none on the bounded one.
        assert_eq!(svg.matches(r#"class="arrow""#).count(), 2);
        assert_eq!(svg.matches("(unbounded)").count(), 1);
        assert!(svg.contains(r#"class="margin""#) && svg.contains(r#"class="one""#));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
