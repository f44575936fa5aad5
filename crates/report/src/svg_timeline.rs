//! One cell's timeline as a small SVG (a small multiple): throughput per interval on top,
//! latency below on a log scale (p50 to p99 as a dark band, p99 to max as a light one, the
//! p50 and p99 as lines), the ramp, the steady-state window and stalls shaded, events as
//! dashed vertical marks, a curve point's asked rate as a horizontal one. Scales come from
//! outside ([`Scale`]) so that every chart of a workload shares them.
//!
//! Classes are the stable hooks tests find things by: `tl-tput`, `tl-band-p50-p99`,
//! `tl-band-p99-max`, `tl-p50`, `tl-p99`, `tl-ramp`, `tl-steady`, `tl-stall`, `tl-asked`,
//! and `tl-mark` with the event's kind (`tl-fault`, `tl-path`, `tl-error`,
//! `tl-precondition`).

use std::fmt::Write as _;

use crate::fmt::html as esc;
use crate::svg::nice_axis;
use crate::timeline::{Point, Scale, Timeline};
pub use sanbench_units::fmt::latency_us_tick as us_label;
use sanbench_units::fmt::{num, short, si_short};

const W: f64 = 360.0;
const LEFT: f64 = 50.0;
const RIGHT: f64 = 10.0;
/// The throughput panel and the latency panel, top to bottom.
const T_TOP: f64 = 34.0;
const T_BOT: f64 = 104.0;
const L_TOP: f64 = 116.0;
const L_BOT: f64 = 206.0;
const H: f64 = 226.0;
/// Marks labelled in the chart (the rest by their tooltip only, so labels stay readable).
const LABELLED: usize = 3;

/// A mark's text in the chart: before any colon, at most 24 characters (the whole label is
/// its tooltip).
fn short_label(label: &str) -> String {
    let head = label.split(':').next().unwrap_or(label);
    head.chars().take(24).collect()
}

struct Axes {
    sc: Scale,
    tput_top: f64,
}

impl Axes {
    fn x(&self, t: f64) -> f64 {
        LEFT + (t - self.sc.x0) / (self.sc.x1 - self.sc.x0) * (W - LEFT - RIGHT)
    }
    fn y_tput(&self, v: f64) -> f64 {
        T_BOT - (v / self.tput_top).clamp(0.0, 1.0) * (T_BOT - T_TOP)
    }
    fn y_lat(&self, us: f64) -> f64 {
        let (lo, hi) = (self.sc.lat_lo.log10(), self.sc.lat_hi.log10());
        let f = (us.max(self.sc.lat_lo).log10() - lo) / (hi - lo);
        L_BOT - f.clamp(0.0, 1.0) * (L_BOT - L_TOP)
    }
}

/// Runs of consecutive points with every latency figure known (an interval without a
/// completion has none): each is drawn as its own band and line.
fn runs(points: &[Point]) -> Vec<&[Point]> {
    points
        .split(|p| !(p.p50_us > 0.0 && p.p99_us > 0.0 && p.max_us > 0.0))
        .filter(|r| !r.is_empty())
        .collect()
}

/// A step line through `v(p)` over each point's span.
fn steps(a: &Axes, pts: &[Point], y: impl Fn(&Point) -> f64) -> String {
    let mut d = String::new();
    for (i, p) in pts.iter().enumerate() {
        let (x0, x1, y) = (a.x(p.t), a.x(p.t + p.len), y(p));
        let _ = write!(
            d,
            "{}{x0:.1} {y:.1}L{x1:.1} {y:.1}",
            if i == 0 { "M" } else { "L" }
        );
    }
    d
}

/// The region between two step lines (`hi` forward, `lo` back).
fn band(a: &Axes, pts: &[Point], hi: impl Fn(&Point) -> f64, lo: impl Fn(&Point) -> f64) -> String {
    let mut d = steps(a, pts, hi);
    for p in pts.iter().rev() {
        let y = lo(p);
        let _ = write!(d, "L{:.1} {y:.1}L{:.1} {y:.1}", a.x(p.t + p.len), a.x(p.t));
    }
    d.push('Z');
    d
}

fn region(
    s: &mut String,
    a: &Axes,
    class: &str,
    from: f64,
    to: f64,
    (y0, y1): (f64, f64),
    title: &str,
) {
    let (x0, x1) = (a.x(from.max(a.sc.x0)), a.x(to.min(a.sc.x1)));
    if x1 <= x0 {
        return;
    }
    let _ = write!(
        s,
        r#"<rect class="{class}" x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
        x1 - x0,
        y1 - y0,
        esc(title)
    );
}

/// The small multiple of one timeline, in `colour` (its target's).
pub fn chart(t: &Timeline, sc: &Scale, colour: &str) -> String {
    let (tput_top, tput_step) = nice_axis(sc.tput_max);
    let a = Axes { sc: *sc, tput_top };
    let mut s = String::with_capacity(8 * 1024);
    let title = format!("{}: {}", t.target, t.title());
    let _ = write!(
        s,
        r#"<svg class="chart timeline" viewBox="0 0 {W} {H}" role="img" xmlns="http://www.w3.org/2000/svg"><title>{}</title><text class="chart-title" x="{LEFT}" y="14">{}</text><text class="tick" x="{}" y="14" text-anchor="end">{} intervals of {} s</text>"#,
        esc(&title),
        esc(&t.title()),
        W - RIGHT,
        t.intervals,
        short(t.interval_s)
    );
    // Shading first, so lines and marks sit on top.
    if t.ramp_s > 0.0 {
        region(
            &mut s,
            &a,
            "tl-ramp",
            -t.ramp_s,
            0.0,
            (T_TOP, L_BOT),
            &format!("ramp: {} s before the window, not measured", num(t.ramp_s)),
        );
    }
    if let Some((from, to, steady)) = t.steady {
        region(
            &mut s,
            &a,
            if steady {
                "tl-steady"
            } else {
                "tl-steady tl-unsteady"
            },
            from,
            to,
            (T_TOP, T_BOT),
            &format!(
                "steady-state window: the last {} s, {}",
                num(to - from),
                if steady { "steady" } else { "not steady" }
            ),
        );
    }
    for st in &t.stalls {
        region(
            &mut s,
            &a,
            "tl-stall",
            st.from,
            st.to,
            (T_TOP, L_BOT),
            &st.label,
        );
    }
    // Axes: throughput 0 .. top in steps, latency by decades.
    let mut v = 0.0;
    while v <= tput_top + tput_step * 1e-9 {
        let y = a.y_tput(v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/>"#,
            W - RIGHT
        );
        if v == 0.0 || (v - tput_top).abs() < tput_step * 1e-9 || tput_top / tput_step <= 3.0 {
            let _ = write!(
                s,
                r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 4.0,
                y + 3.5,
                si_short(v)
            );
        }
        v += tput_step;
    }
    let _ = write!(
        s,
        r#"<text class="axis-label" x="{}" y="{}" text-anchor="end">{} per interval</text>"#,
        W - RIGHT,
        T_TOP - 4.0,
        t.unit.label()
    );
    let mut dec = sc.lat_lo;
    while dec <= sc.lat_hi * 1.0001 {
        let y = a.y_lat(dec);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            W - RIGHT,
            LEFT - 4.0,
            y + 3.5,
            us_label(dec)
        );
        dec *= 10.0;
    }
    let _ = write!(
        s,
        r#"<text class="axis-label" x="{}" y="{}" text-anchor="end">latency: p50–p99, p99–max (log)</text>"#,
        W - RIGHT,
        L_TOP - 3.0
    );
    // Time ticks: the window's start and end, and its middle.
    let mut xs = vec![sc.x0, 0.0, sc.x1 / 2.0, sc.x1];
    xs.dedup();
    for x in xs {
        let anchor = match x {
            _ if x == sc.x1 => "end",
            _ if x == sc.x0 => "start",
            _ => "middle",
        };
        let _ = write!(
            s,
            r#"<text class="tick" x="{:.1}" y="{}" text-anchor="{anchor}">{} s</text>"#,
            a.x(x),
            L_BOT + 13.0,
            short(x)
        );
    }
    if let Some(asked) = t.asked.filter(|v| *v > 0.0) {
        let y = a.y_tput(asked);
        let _ = write!(
            s,
            r#"<line class="tl-asked" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"><title>asked: {} {}</title></line>"#,
            W - RIGHT,
            num(asked),
            t.unit.label()
        );
    }
    let _ = write!(
        s,
        r#"<path class="tl-tput" d="{}" stroke="{colour}"><title>{} per interval</title></path>"#,
        steps(&a, &t.points, |p| a.y_tput(p.tput)),
        t.unit.label()
    );
    for run in runs(&t.points) {
        let _ = write!(
            s,
            r#"<path class="tl-band tl-band-p99-max" d="{}" fill="{colour}"><title>p99 to max per interval</title></path><path class="tl-band tl-band-p50-p99" d="{}" fill="{colour}"><title>p50 to p99 per interval</title></path><path class="tl-p99" d="{}" stroke="{colour}"><title>p99 per interval</title></path><path class="tl-p50" d="{}" stroke="{colour}"><title>p50 per interval</title></path>"#,
            band(&a, run, |p| a.y_lat(p.max_us), |p| a.y_lat(p.p99_us)),
            band(&a, run, |p| a.y_lat(p.p99_us), |p| a.y_lat(p.p50_us)),
            steps(&a, run, |p| a.y_lat(p.p99_us)),
            steps(&a, run, |p| a.y_lat(p.p50_us)),
        );
    }
    for (i, m) in t.marks.iter().enumerate() {
        if !(sc.x0..=sc.x1).contains(&m.t) {
            continue;
        }
        let x = a.x(m.t);
        let _ = write!(
            s,
            r#"<line class="tl-mark {}" x1="{x:.1}" x2="{x:.1}" y1="{T_TOP}" y2="{L_BOT}"><title>{} at {} s</title></line>"#,
            m.kind.class(),
            esc(&m.label),
            num(m.t)
        );
        if i < LABELLED {
            let _ = write!(
                s,
                r#"<text class="mark-label {}" x="{:.1}" y="{}">{}</text>"#,
                m.kind.class(),
                x + 2.0,
                T_TOP + 8.0 + 9.0 * i as f64,
                esc(&short_label(&m.label))
            );
        }
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT}" x2="{}" y1="{T_BOT}" y2="{T_BOT}"/><line class="axis" x1="{LEFT}" x2="{}" y1="{L_BOT}" y2="{L_BOT}"/></svg>"#,
        W - RIGHT,
        W - RIGHT
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{scale, Kind, Mark, Span, Unit};

    fn timeline() -> Timeline {
        let points = (0..10)
            .map(|i| Point {
                t: i as f64,
                len: 1.0,
                tput: 1000.0,
                // Interval 4 completed nothing.
                p50_us: if i == 4 { 0.0 } else { 100.0 },
                p99_us: if i == 4 { 0.0 } else { 900.0 },
                max_us: if i == 4 { 0.0 } else { 5000.0 },
                errors: 0,
            })
            .collect();
        Timeline {
            target: "<a>".into(),
            round: 1,
            load_pct: Some(50.0),
            in_progress: false,
            unit: Unit::Iops,
            points,
            intervals: 10,
            interval_s: 1.0,
            ramp_s: 2.0,
            window_s: 10.0,
            steady: Some((5.0, 10.0, true)),
            marks: vec![
                Mark {
                    t: -2.0,
                    kind: Kind::Precondition,
                    label: "preconditioned".into(),
                },
                Mark {
                    t: 3.3,
                    kind: Kind::Fault,
                    label: "b down".into(),
                },
                Mark {
                    t: 3.9,
                    kind: Kind::Path,
                    label: "path 1 failed".into(),
                },
            ],
            stalls: vec![Span {
                from: 4.0,
                to: 5.0,
                label: "stall".into(),
            }],
            asked: Some(1100.0),
        }
    }

    #[test]
    fn every_band_line_region_and_mark_is_drawn() {
        let t = timeline();
        let svg = chart(&t, &scale(std::slice::from_ref(&t)), "#0072b2");
        // The empty interval splits the latency into two runs, each with both bands.
        for class in ["tl-band-p50-p99", "tl-band-p99-max", "tl-p50", "tl-p99"] {
            assert_eq!(svg.matches(&format!("{class}\"")).count(), 2, "{class}");
        }
        for class in ["tl-tput", "tl-ramp", "tl-steady", "tl-stall", "tl-asked"] {
            assert_eq!(
                svg.matches(&format!("class=\"{class}\"")).count(),
                1,
                "{class}"
            );
        }
        for kind in ["tl-precondition", "tl-fault", "tl-path"] {
            assert_eq!(svg.matches(&format!("tl-mark {kind}")).count(), 1, "{kind}");
        }
        assert!(svg.contains("b down at 3.30 s"));
        assert!(!svg.contains("<a>") && svg.contains("&lt;a&gt;"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Log scale: decades from 100 µs to 10 ms, each a tick.
        for l in ["100 µs", "1 ms", "10 ms"] {
            assert!(svg.contains(&format!(">{l}<")), "{l}");
        }
    }

    #[test]
    fn latency_sits_on_a_log_axis() {
        let t = timeline();
        let sc = scale(std::slice::from_ref(&t));
        let a = Axes { sc, tput_top: 1.0 };
        let (y100, y1k, y10k) = (a.y_lat(100.0), a.y_lat(1000.0), a.y_lat(10_000.0));
        assert!(
            (y100 - y1k - (y1k - y10k)).abs() < 1e-9,
            "decades equally spaced"
        );
        assert_eq!(y100, L_BOT);
        assert_eq!(y10k, L_TOP);
    }

    #[test]
    fn odd_timelines_still_draw() {
        let mut t = timeline();
        t.points.clear();
        t.marks.clear();
        t.asked = None;
        let svg = chart(&t, &scale(&[]), "#000");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("tl-band") && !svg.contains("NaN"));
    }
}
