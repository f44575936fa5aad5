//! Inline SVG charts, written by hand: grouped bars with 95 % error bars, and lines.
//!
//! A plotting crate would bring fonts or a raster backend; these charts need neither, render the
//! same in every browser, and stay small enough to embed many in one page. Every string that
//! reaches the SVG is escaped. Colours are fixed per target index so a target keeps its colour
//! across charts.

use std::fmt::Write as _;

use crate::fmt::html as esc;
use sanbench_units::fmt::{num, short};

/// A muted, colour-blind-friendly palette (Okabe-Ito, darkened a little for print).
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#8c7a00", "#555555",
];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 54.0;
const BOTTOM: f64 = 50.0;

/// One bar series: a target's (mean, 95 % CI half-width) per group; `None` = no data.
pub struct BarSeries {
    pub name: String,
    pub colour: &'static str,
    pub values: Vec<Option<(f64, f64)>>,
}

pub struct LineSeries {
    pub name: String,
    pub colour: &'static str,
    pub points: Vec<(f64, f64)>,
}

/// Round axis maximum and tick step for data up to `max`.
pub fn nice_axis(max: f64) -> (f64, f64) {
    if !max.is_finite() || max <= 0.0 {
        return (1.0, 0.25);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// Width of a character of the 11 px legend, generous (system fonts run 5.5-6.5 px), so that
/// an estimate never lets a name run past the chart's edge.
pub const LEGEND_CHAR_W: f64 = 6.6;
const LEGEND_ROW: f64 = 15.0;

/// Where each legend entry goes: (x, row). Entries fill a row from the plot's left edge and
/// wrap when the next would pass the right edge, so that five long target names ("tmpfs file
/// (io_uring)", "NVMe-TCP (loopback)") all show in full; the chart grows a row taller for
/// each extra row rather than squeezing the plot.
fn legend_layout(names: &[&str]) -> Vec<(f64, usize)> {
    let mut out = Vec::with_capacity(names.len());
    let (mut x, mut row) = (LEFT, 0);
    for name in names {
        let w = 14.0 + LEGEND_CHAR_W * name.chars().count() as f64;
        if x > LEFT && x + w > W - RIGHT {
            x = LEFT;
            row += 1;
        }
        out.push((x, row));
        x += w + 10.0;
    }
    out
}

/// Opens a chart whose legend holds `names`; returns how far the plot moves down for the
/// legend's extra rows. Everything after is drawn in a group shifted by that much, so the
/// plot's own coordinates stay those of a one-row legend.
fn open(s: &mut String, title: &str, class: &str, items: &[(&str, &str)]) -> f64 {
    let names: Vec<&str> = items.iter().map(|(n, _)| *n).collect();
    let layout = legend_layout(&names);
    let rows = layout.iter().map(|(_, r)| r + 1).max().unwrap_or(1);
    let extra = (rows - 1) as f64 * LEGEND_ROW;
    let _ = write!(
        s,
        r##"<svg class="chart {class}" viewBox="0 0 {W} {}" role="img" xmlns="http://www.w3.org/2000/svg"><title>{t}</title><text class="chart-title" x="{LEFT}" y="18">{t}</text>"##,
        H + extra,
        t = esc(title)
    );
    for ((name, colour), (x, row)) in items.iter().zip(layout) {
        let y = 28.0 + row as f64 * LEGEND_ROW;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="{y}" width="10" height="10" fill="{colour}"/><text class="legend" x="{:.1}" y="{}">{}</text>"#,
            x + 14.0,
            y + 9.0,
            esc(name)
        );
    }
    let _ = write!(s, r#"<g transform="translate(0 {extra})">"#);
    extra
}

fn y_axis(s: &mut String, top: f64, step: f64, unit: &str) {
    let plot_h = H - TOP - BOTTOM;
    let mut v = 0.0;
    while v <= top + step * 1e-9 {
        let y = H - BOTTOM - v / top * plot_h;
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            num(v)
        );
        v += step;
    }
    let _ = write!(
        s,
        r#"<text class="axis-label" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        esc(unit)
    );
}

/// Splits a label into at most two lines of about `width` characters.
fn wrap(label: &str, width: usize) -> Vec<String> {
    if label.chars().count() <= width {
        return vec![label.to_string()];
    }
    let cut = label
        .char_indices()
        .filter(|(i, c)| *c == ' ' && *i <= width)
        .map(|(i, _)| i)
        .next_back()
        .unwrap_or(width.min(label.len()));
    let (a, b) = label.split_at(label.floor_char_boundary(cut));
    let mut b: String = b.trim().to_string();
    if b.chars().count() > width {
        b = b.chars().take(width.saturating_sub(1)).collect::<String>() + "…";
    }
    vec![a.trim().to_string(), b]
}

/// Grouped bars: one group per entry of `groups`, one bar per series, error bars where the CI
/// is known (> 0).
pub fn bar_chart(title: &str, unit: &str, groups: &[String], series: &[BarSeries]) -> String {
    let mut s = String::new();
    open(
        &mut s,
        title,
        "bars",
        &series
            .iter()
            .map(|x| (x.name.as_str(), x.colour))
            .collect::<Vec<_>>(),
    );
    let max = series
        .iter()
        .flat_map(|x| x.values.iter().flatten())
        .map(|(m, c)| m + c.max(0.0))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(max);
    y_axis(&mut s, top, step, unit);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let gw = plot_w / groups.len().max(1) as f64;
    let bw = (gw * 0.8 / series.len().max(1) as f64).min(48.0);
    let y_of = |v: f64| H - BOTTOM - (v / top).clamp(0.0, 1.0) * plot_h;
    for (g, label) in groups.iter().enumerate() {
        let x0 = LEFT + g as f64 * gw + (gw - bw * series.len() as f64) / 2.0;
        for (i, ser) in series.iter().enumerate() {
            let x = x0 + i as f64 * bw;
            match ser.values.get(g).copied().flatten() {
                Some((m, ci)) if m.is_finite() => {
                    let y = y_of(m);
                    let ci_txt = if ci > 0.0 {
                        format!(" ± {}", num(ci))
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        s,
                        r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}{ci_txt} {}</title></rect>"#,
                        x + 1.0,
                        bw - 2.0,
                        H - BOTTOM - y,
                        ser.colour,
                        esc(&ser.name),
                        num(m),
                        esc(unit)
                    );
                    if ci > 0.0 && ci.is_finite() {
                        let cx = x + bw / 2.0;
                        let (y1, y2) = (y_of(m + ci), y_of((m - ci).max(0.0)));
                        let _ = write!(
                            s,
                            r#"<path class="err" d="M{cx:.1} {y1:.1}V{y2:.1}M{:.1} {y1:.1}h8M{:.1} {y2:.1}h8"/>"#,
                            cx - 4.0,
                            cx - 4.0
                        );
                    }
                }
                _ => {
                    let _ = write!(
                        s,
                        r#"<text class="na" x="{:.1}" y="{:.1}" text-anchor="middle">n/a</text>"#,
                        x + bw / 2.0,
                        H - BOTTOM - 4.0
                    );
                }
            }
        }
        let lines = wrap(label, (gw / 6.2) as usize);
        for (k, line) in lines.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text class="group" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                LEFT + g as f64 * gw + gw / 2.0,
                H - BOTTOM + 16.0 + 13.0 * k as f64,
                esc(line)
            );
        }
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT}" x2="{}" y1="{}" y2="{}"/></g></svg>"#,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM
    );
    s
}

/// A vertical line across a chart at `x`, labelled (an event on a timeline).
pub struct Mark {
    pub x: f64,
    pub label: String,
    pub colour: &'static str,
}

/// Lines with markers; `log2_x` spaces the x axis by powers of two (queue depths).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[LineSeries],
    log2_x: bool,
) -> String {
    line_chart_marked(title, x_label, y_label, series, log2_x, &[])
}

/// [`line_chart`] with vertical marks (events), each labelled at the top of the plot and in
/// its tooltip; marks outside the data's x range are left out.
pub fn line_chart_marked(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[LineSeries],
    log2_x: bool,
    marks: &[Mark],
) -> String {
    let mut s = String::new();
    open(
        &mut s,
        title,
        "lines",
        &series
            .iter()
            .map(|x| (x.name.as_str(), x.colour))
            .collect::<Vec<_>>(),
    );
    let fx = |x: f64| if log2_x { x.max(1e-9).log2() } else { x };
    let pts = || {
        series
            .iter()
            .flat_map(|x| x.points.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let ymax = pts().map(|p| p.1).fold(0.0, f64::max);
    let xmin = pts().map(|p| fx(p.0)).fold(f64::INFINITY, f64::min);
    let xmax = pts().map(|p| fx(p.0)).fold(f64::NEG_INFINITY, f64::max);
    let (xmin, xmax) = if xmin.is_finite() && xmax > xmin {
        (xmin, xmax)
    } else {
        (0.0, 1.0)
    };
    let (top, step) = nice_axis(ymax);
    y_axis(&mut s, top, step, y_label);
    let plot_w = W - LEFT - RIGHT - 12.0;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + 6.0 + (fx(x) - xmin) / (xmax - xmin) * plot_w;
    let py = |y: f64| H - BOTTOM - (y / top).clamp(0.0, 1.0) * plot_h;
    // X ticks: every distinct x (queue depths), or about ten for time.
    let mut xs: Vec<f64> = pts().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let every = (xs.len() / 10).max(1);
    for x in xs.iter().step_by(every) {
        let _ = write!(
            s,
            r#"<text class="tick" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            px(*x),
            H - BOTTOM + 16.0,
            short(*x)
        );
    }
    let _ = write!(
        s,
        r#"<text class="axis-label" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        H - 10.0,
        esc(x_label)
    );
    for (i, m) in marks.iter().enumerate() {
        if !m.x.is_finite() || fx(m.x) < xmin || fx(m.x) > xmax {
            continue;
        }
        let x = px(m.x);
        // Labels alternate between two rows so that close events stay readable.
        let _ = write!(
            s,
            r#"<line class="mark" x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="{}" stroke-dasharray="4 3"><title>{}</title></line><text class="mark-label" x="{:.1}" y="{}" style="fill:{}">{}</text>"#,
            TOP - 4.0,
            H - BOTTOM,
            m.colour,
            esc(&m.label),
            x + 3.0,
            TOP + 8.0 + 11.0 * (i % 2) as f64,
            m.colour,
            esc(&m.label)
        );
    }
    for ser in series {
        let mut d = String::new();
        for (i, (x, y)) in ser
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .enumerate()
        {
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if i == 0 { "M" } else { "L" },
                px(*x),
                py(*y)
            );
        }
        let _ = write!(
            s,
            r#"<path class="line" d="{d}" stroke="{}"><title>{}</title></path>"#,
            ser.colour,
            esc(&ser.name)
        );
        if ser.points.len() <= 16 {
            for (x, y) in ser
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
            {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{}: {} at {}</title></circle>"#,
                    px(*x),
                    py(*y),
                    ser.colour,
                    esc(&ser.name),
                    num(*y),
                    num(*x)
                );
            }
        }
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT}" x2="{}" y1="{}" y2="{}"/></g></svg>"#,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_is_round() {
        assert_eq!(nice_axis(95_000.0), (100_000.0, 20_000.0));
        assert_eq!(nice_axis(7.3), (8.0, 2.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.25));
        assert_eq!(nice_axis(f64::NAN), (1.0, 0.25));
    }

    #[test]
    fn five_long_names_wrap_inside_the_chart() {
        let names = [
            "RAM (in-process)",
            "tmpfs file (io_uring)",
            "NBD (loopback)",
            "iSCSI (loopback)",
            "NVMe-TCP (loopback)",
        ];
        let layout = legend_layout(&names);
        for ((x, _), n) in layout.iter().zip(names) {
            assert!(
                x + 14.0 + LEGEND_CHAR_W * n.chars().count() as f64 <= W - RIGHT,
                "{n}"
            );
        }
        assert_eq!(layout.last().unwrap().1, 1, "the fifth name wraps");
        let series: Vec<BarSeries> = names
            .iter()
            .enumerate()
            .map(|(i, n)| BarSeries {
                name: n.to_string(),
                colour: colour(i),
                values: vec![Some((1.0, 0.1))],
            })
            .collect();
        let svg = bar_chart("t", "MB/s", &["w".into()], &series);
        // One row more: the chart is a row taller, the plot shifted under the legend.
        assert!(svg.contains(&format!(r#"viewBox="0 0 {W} {}""#, H + LEGEND_ROW)));
        assert!(svg.contains(&format!(r#"<g transform="translate(0 {LEGEND_ROW})">"#)));
        assert!(svg.ends_with("</g></svg>"));
        // A single short name stays on one row, as before.
        assert_eq!(legend_layout(&["a"]), vec![(LEFT, 0)]);
    }

    #[test]
    fn charts_escape_and_survive_odd_data() {
        let s = bar_chart(
            "<t>",
            "MB/s",
            &["a & b".into(), "c".into()],
            &[BarSeries {
                name: "x<y".into(),
                colour: colour(0),
                values: vec![Some((f64::NAN, 0.0)), None],
            }],
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(!s.contains("<t>") && !s.contains("x<y") && !s.contains("NaN"));
        let l = line_chart("t", "x", "y", &[], true);
        assert!(l.ends_with("</svg>") && !l.contains("NaN"));
        assert_eq!(wrap("Sequential read, 1 MiB, QD 12", 20).len(), 2);
    }
}
