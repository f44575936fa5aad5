//! The two text formats the endpoint speaks, behind one [`Writer`]: the Prometheus text
//! exposition format 0.0.4, and OpenMetrics 1.0 (the OpenMetrics specification, "Text
//! format") when the scraper asks for it in its `Accept` header ([`Format::negotiate`]).
//!
//! What differs, and is done here so that no figure is written twice:
//! * a counter's family is named without `_total` in OpenMetrics (`# TYPE sanbench_ios
//!   counter`, samples `sanbench_ios_total`); Prometheus 0.0.4 names family and sample alike
//!   (`# TYPE sanbench_ios_total counter`);
//! * OpenMetrics states a family's unit (`# UNIT sanbench_latency_seconds seconds`; the name
//!   ends with it) and ends the exposition with `# EOF`;
//! * the content types (`text/plain; version=0.0.4` and `application/openmetrics-text;
//!   version=1.0.0`).

use std::fmt::Write as _;

/// A text format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text exposition format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

/// Largest number of media ranges of an `Accept` value looked at.
const MAX_RANGES: usize = 32;

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The label of the scrape counter.
    pub fn name(self) -> &'static str {
        match self {
            Format::Prometheus => "prometheus",
            Format::OpenMetrics => "openmetrics",
        }
    }

    /// The format for a request's `Accept` value (RFC 9110 §12.5.1): OpenMetrics when it lists
    /// `application/openmetrics-text` (version 1.0.0, 0.0.1 or none) with a weight above 0
    /// and at least that of `text/plain` and of `*/*`; Prometheus text otherwise (no header,
    /// a malformed one, or a preference for text).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        let (mut om, mut text) = (0.0f64, 0.0f64);
        for range in accept.split(',').take(MAX_RANGES) {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let (mut q, mut version) = (1.0f64, None);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => {
                        q = v
                            .parse()
                            .ok()
                            .filter(|q: &f64| (0.0..=1.0).contains(q))
                            .unwrap_or(0.0)
                    }
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if version
                        .as_deref()
                        .is_none_or(|v| v == "1.0.0" || v == "0.0.1") =>
                {
                    om = om.max(q)
                }
                "text/plain" | "*/*" | "text/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }
}

/// A family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Writes an exposition in one format: families, then their samples.
pub struct Writer {
    format: Format,
    out: String,
}

impl Writer {
    pub fn new(format: Format) -> Writer {
        Writer {
            format,
            out: String::new(),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Starts a family. `name`: a counter's without `_total` (its samples are
    /// `{name}_total`); `unit`: the suffix its name ends with, if any (`seconds`, `bytes`).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str, unit: Option<&str>) {
        let shown = match (self.format, kind) {
            (Format::Prometheus, Kind::Counter) => format!("{name}_total"),
            _ => name.to_string(),
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# TYPE {shown} {}", kind.name());
        if let (Format::OpenMetrics, Some(u)) = (self.format, unit) {
            let _ = writeln!(self.out, "# UNIT {shown} {u}");
        }
        let _ = writeln!(self.out, "# HELP {shown} {help}");
    }

    /// One sample: `name` is the sample's whole name (`..._total`, `..._bucket`), `labels`
    /// already formatted (see [`labels`]), empty for none.
    pub fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
    }

    /// A histogram's samples for one label set: cumulative buckets at `bounds` (then +Inf),
    /// the sum and the count. `counts[i]`: observations at or below `bounds[i]` and above the
    /// bound before (not cumulative); `over`: above the last bound.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &str,
        bounds: impl Iterator<Item = f64>,
        counts: &[u64],
        over: u64,
        sum: f64,
    ) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cum = 0;
        for (b, n) in bounds.zip(counts) {
            cum += n;
            let _ = writeln!(self.out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cum}");
        }
        cum += over;
        let _ = writeln!(self.out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cum}");
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, cum);
    }

    /// The exposition's text (OpenMetrics: with its `# EOF`).
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// `k="v",...` with values escaped as both formats want them (backslash, double quote,
/// newline).
pub fn labels(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape(v));
    }
    s
}

/// A label value as the formats want it: backslash, double quote and newline escaped.
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What an endpoint serves: writes its families into `w`.
pub trait Exposition: Send + Sync {
    fn render(&self, w: &mut Writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_s_own_accept_header_gets_openmetrics() {
        // What Prometheus 2.x sends with every scrape.
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                    version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
        for (accept, want) in [
            (None, Format::Prometheus),
            (Some("text/plain"), Format::Prometheus),
            (Some("*/*"), Format::Prometheus),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (
                Some("text/plain;q=0.9, application/openmetrics-text;q=0.5"),
                Format::Prometheus,
            ),
            (Some("application/openmetrics-text;q=0"), Format::Prometheus),
            (
                Some("application/openmetrics-text;version=2.0.0"),
                Format::Prometheus,
            ),
            (
                Some("Application/OpenMetrics-Text; q=\"1\""),
                Format::OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;q=nonsense"),
                Format::Prometheus,
            ),
            (Some(",,;;=,"), Format::Prometheus),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn a_counter_is_named_per_format_and_openmetrics_ends_with_eof() {
        for (f, ty, unit, eof) in [
            (
                Format::Prometheus,
                "# TYPE x_bytes_total counter\n",
                false,
                false,
            ),
            (Format::OpenMetrics, "# TYPE x_bytes counter\n", true, true),
        ] {
            let mut w = Writer::new(f);
            w.family("x_bytes", Kind::Counter, "Bytes.", Some("bytes"));
            w.sample("x_bytes_total", &labels(&[("a", "q\"\\\n")]), 3);
            let t = w.finish();
            assert!(t.starts_with(ty), "{t}");
            assert_eq!(t.contains("# UNIT x_bytes bytes\n"), unit, "{t}");
            assert!(t.contains("x_bytes_total{a=\"q\\\"\\\\\\n\"} 3\n"), "{t}");
            assert_eq!(t.ends_with("# EOF\n"), eof, "{t}");
        }
    }
}
