//! HdrHistogram's interval log (the `.hlog` text of HdrHistogram's `HistogramLogWriter`, read
//! by its `HistogramLogProcessor` and by the `hdrhistogram` Python package), as text: the
//! caller writes it where it wants (this crate does no I/O).
//!
//! A log is a header (comments, `#[StartTime: ...]`, `#[BaseTime: ...]`, the legend line)
//! and then one line per interval: `[Tag=NAME,]StartTimestamp,Interval_Length,Interval_Max,
//! Interval_Compressed_Histogram`, timestamps in seconds since the base time, the histogram in
//! HdrHistogram's V2 compressed (deflate) encoding in base64. Values are nanoseconds; the max
//! column is in milliseconds (a max value divisor of 10^6, as HdrHistogram's tools expect for
//! nanosecond recordings shown in milliseconds).

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{
    Serializer, V2DeflateSerializer, V2SerializeError, V2Serializer,
};
use hdrhistogram::{Counter, Histogram};

use crate::LatencyHistogram;

/// The legend line HdrHistogram's writers put after the header.
pub const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// The max column's divisor: nanoseconds recorded, milliseconds shown.
const MAX_DIVISOR: f64 = 1e6;

/// A tag that HdrHistogram's log can carry (no comma, no whitespace, not empty).
#[derive(Debug, thiserror::Error)]
#[error("histogram log tag {0:?}: must be non-empty without commas or whitespace")]
pub struct BadTag(pub String);

/// The log's header: `comments` (one `#` line each), the start and base time (both `base`:
/// every interval's timestamp counts from it), the legend.
pub fn header(comments: &[String], base: SystemTime) -> String {
    let mut out = Vec::new();
    let mut b = IntervalLogWriterBuilder::new();
    for c in comments {
        b.add_comment(c);
    }
    b.with_start_time(base)
        .with_base_time(base)
        .with_max_value_divisor(MAX_DIVISOR);
    let mut ser = V2DeflateSerializer::new();
    // Writing to a Vec cannot fail.
    let _ = b.begin_log_with(&mut out, &mut ser);
    let mut s = String::from_utf8_lossy(&out).into_owned();
    s.push_str(LEGEND);
    s.push('\n');
    s
}

/// One interval's line: its histogram recorded from `start` (since the base time) for `len`.
/// A log of many lines keeps one [`Lines`] instead: this builds a compressor per call.
pub fn line(
    h: &LatencyHistogram,
    start: Duration,
    len: Duration,
    tag: Option<&str>,
) -> Result<String, BadTag> {
    Lines::default().line(h, start, len, tag)
}

/// Writes a log's interval lines with one compressor kept from line to line: HdrHistogram's
/// own V2 deflate serializer builds a zlib stream per histogram, whose zeroed window and
/// tables (a few hundred KiB) cost page faults at every interval of a 10 ms log.
#[derive(Default)]
pub struct Lines {
    ser: ReusedDeflate,
}

impl Lines {
    /// One interval's line: its histogram recorded from `start` (since the base time) for
    /// `len`.
    pub fn line(
        &mut self,
        h: &LatencyHistogram,
        start: Duration,
        len: Duration,
        tag: Option<&str>,
    ) -> Result<String, BadTag> {
        let tag = match tag {
            Some(t) if t.chars().any(char::is_whitespace) => return Err(BadTag(t.into())),
            Some(t) => Some(Tag::new(t).ok_or_else(|| BadTag(t.into()))?),
            None => None,
        };
        let mut out = Vec::new();
        let b = {
            let mut b = IntervalLogWriterBuilder::new();
            b.with_max_value_divisor(MAX_DIVISOR);
            b
        };
        // The builder writes nothing but the divisor's comment, which is dropped below;
        // writing to a Vec cannot fail and every u64 histogram serializes.
        if let Ok(mut w) = b.begin_log_with(&mut out, &mut self.ser) {
            let _ = w.write_histogram(&h.h, start, len, tag);
        }
        let text = String::from_utf8_lossy(&out);
        Ok(text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect())
    }
}

/// HdrHistogram's V2 compressed encoding: the compressed cookie, the zlib stream's length
/// (big-endian u32) and the zlib stream of the V2 encoding, as `V2DeflateSerializer` writes
/// it, with the compressor reset rather than rebuilt between histograms.
struct ReusedDeflate {
    v2: V2Serializer,
    raw: Vec<u8>,
    out: Vec<u8>,
    z: flate2::Compress,
}

impl Default for ReusedDeflate {
    fn default() -> Self {
        Self {
            v2: V2Serializer::new(),
            raw: Vec::new(),
            out: Vec::new(),
            z: flate2::Compress::new(flate2::Compression::default(), true),
        }
    }
}

/// HdrHistogram's cookie for the V2 compressed encoding.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

#[derive(Debug)]
enum DeflateError {
    V2(#[allow(dead_code)] V2SerializeError),
    Io(#[allow(dead_code)] std::io::Error),
}

impl Serializer for ReusedDeflate {
    type SerializeError = DeflateError;

    fn serialize<T: Counter, W: std::io::Write>(
        &mut self,
        h: &Histogram<T>,
        writer: &mut W,
    ) -> Result<usize, DeflateError> {
        self.raw.clear();
        self.v2
            .serialize(h, &mut self.raw)
            .map_err(DeflateError::V2)?;
        self.out.clear();
        self.out
            .extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]);
        self.z.reset();
        let mut taken = 0;
        loop {
            if self.out.capacity() - self.out.len() < 256 {
                self.out.reserve(self.raw.len() / 2 + 256);
            }
            let before = self.z.total_in();
            let st = self
                .z
                .compress_vec(
                    &self.raw[taken..],
                    &mut self.out,
                    flate2::FlushCompress::Finish,
                )
                .map_err(|e| DeflateError::Io(e.into()))?;
            taken += (self.z.total_in() - before) as usize;
            if st == flate2::Status::StreamEnd {
                break;
            }
        }
        let n = (self.out.len() - 8) as u32;
        self.out[4..8].copy_from_slice(&n.to_be_bytes());
        writer.write_all(&self.out).map_err(DeflateError::Io)?;
        Ok(self.out.len())
    }
}

/// An interval line whose timestamp counts from the Unix epoch (a process that writes its
/// lines before it knows the log's base time: the other ranks of an MPI job), rewritten to
/// count from `base_s` (Unix seconds): `[Tag=NAME,]START,LEN,MAX,HISTOGRAM` with START moved,
/// everything else as it was. A start up to a second before the base is taken as the base
/// (ranks start their windows a barrier's spread apart, clocks of other hosts a little off).
/// `None` for a line that is not such a line (a comment, a blank, a start further before
/// the base, bytes from a broken peer): the caller drops it.
pub fn rebase(line: &str, base_s: f64) -> Option<String> {
    let (tag, rest) = match line.strip_prefix("Tag=") {
        Some(r) => {
            let (t, rest) = r.split_once(',')?;
            if t.is_empty() || t.chars().any(char::is_whitespace) {
                return None;
            }
            (Some(t), rest)
        }
        None => (None, line),
    };
    let (start, rest) = rest.split_once(',')?;
    let start: f64 = start.trim().parse().ok()?;
    let mut fields = rest.split(',');
    let (len, max, hist) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some()
        || len.trim().parse::<f64>().is_err()
        || max.trim().parse::<f64>().is_err()
        || hist.is_empty()
        || !hist
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
    {
        return None;
    }
    let at = start - base_s;
    if !at.is_finite() || at < -1.0 {
        return None;
    }
    let at = at.max(0.0);
    let tag = tag.map_or(String::new(), |t| format!("Tag={t},"));
    Some(format!("{tag}{at:.3},{len},{max},{hist}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn a_log_reads_back_with_the_crate_s_reader() {
        let mut a = LatencyHistogram::new();
        a.record_n(50_000, 90);
        a.record_n(2_000_000, 10);
        let mut b = LatencyHistogram::new();
        b.record_n(70_000, 5);
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut log = header(&["sanbench test".into()], base);
        let s = Duration::from_millis(100);
        log += &line(&a, Duration::ZERO, s, None).unwrap();
        log += &line(&b, s, s, Some("t1")).unwrap();
        assert!(log.contains("#[StartTime: 1700000000.000"), "{log}");
        assert!(log.contains("#[BaseTime: 1700000000.000"), "{log}");
        assert!(log.contains(LEGEND));
        let mut hists = Vec::new();
        for e in IntervalLogIterator::new(log.as_bytes()) {
            if let Ok(LogEntry::Interval(i)) = e {
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    i.encoded_histogram(),
                )
                .unwrap();
                let h: hdrhistogram::Histogram<u64> =
                    Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                hists.push((i.tag().map(|t| t.as_str().to_string()), i.max(), h));
            }
        }
        assert_eq!(hists.len(), 2);
        assert_eq!(hists[0].2.len(), 100);
        assert_eq!(
            hists[0].2.value_at_quantile(0.5),
            a.h.value_at_quantile(0.5)
        );
        assert!((hists[0].1 - 2.0).abs() < 0.01, "max in ms: {}", hists[0].1);
        assert_eq!(hists[1].0.as_deref(), Some("t1"));
        assert_eq!(hists[1].2.len(), 5);
    }

    /// The compressor kept between lines writes what HdrHistogram's own serializer writes,
    /// line after line (so every reader of the format reads it), and each line decodes to its
    /// own histogram (nothing of an earlier one carried over).
    #[test]
    fn kept_compressor_lines_equal_the_crate_s_and_decode_alone() {
        let crate_line = |h: &LatencyHistogram, start: Duration| {
            let mut out = Vec::new();
            let mut ser = V2DeflateSerializer::new();
            let mut b = IntervalLogWriterBuilder::new();
            b.with_max_value_divisor(MAX_DIVISOR);
            let mut w = b.begin_log_with(&mut out, &mut ser).unwrap();
            w.write_histogram(&h.h, start, Duration::from_millis(10), None)
                .unwrap();
            let text = String::from_utf8(out).unwrap();
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        let mut lines = Lines::default();
        for k in 0..6u64 {
            let mut h = LatencyHistogram::new();
            // Different shapes: wider and narrower, sparse and dense.
            for i in 0..(50 + 400 * (k % 3)) {
                h.record_n(1_000 + (i * 7_919 * (k + 1)) % 5_000_000, 1 + i % 4);
            }
            let start = Duration::from_millis(10 * k);
            let ours = lines
                .line(&h, start, Duration::from_millis(10), None)
                .unwrap();
            assert_eq!(ours, crate_line(&h, start), "line {k}");
            let enc = ours.trim_end().rsplit(',').next().unwrap();
            let bytes =
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, enc).unwrap();
            let back: hdrhistogram::Histogram<u64> =
                Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
            assert_eq!(back.len(), h.count(), "line {k}");
            assert_eq!(back.max(), h.h.max(), "line {k}");
        }
    }

    #[test]
    fn a_line_from_the_epoch_is_rebased_and_anything_else_dropped() {
        let mut h = LatencyHistogram::new();
        h.record_n(40_000, 3);
        let at = Duration::from_millis(1_700_000_123_456);
        let abs = line(&h, at, Duration::from_millis(10), Some("rank1/p0")).unwrap();
        let moved = rebase(abs.trim_end(), 1_700_000_000.0).unwrap();
        let want = line(
            &h,
            Duration::from_millis(123_456),
            Duration::from_millis(10),
            Some("rank1/p0"),
        );
        assert_eq!(moved, want.unwrap());
        let plain = line(&h, at, Duration::from_millis(10), None).unwrap();
        assert!(rebase(plain.trim_end(), 1_700_000_000.0)
            .unwrap()
            .starts_with("123.456,"));
        // A little before the base: at the base.
        assert!(rebase("9.5,1.0,1.0,HIST", 10.0)
            .unwrap()
            .starts_with("0.000,1.0,"));
        for bad in [
            "",
            "#[StartTime: 1.000]",
            "Tag=,1.0,1.0,1.0,HIST",
            "Tag=a b,1.0,1.0,1.0,HIST",
            "1.0,1.0,1.0",
            "x,1.0,1.0,HIST",
            "1.0,1.0,1.0,HI ST",
            "1.0,1.0,1.0,HIST,extra",
            "NaN,1.0,1.0,HIST",
            // Well before the base.
            "8.5,1.0,1.0,HIST",
        ] {
            assert_eq!(rebase(bad, 10.0), None, "{bad}");
        }
    }

    #[test]
    fn a_tag_with_a_comma_is_refused() {
        let h = LatencyHistogram::new();
        assert!(line(&h, Duration::ZERO, Duration::ZERO, Some("a,b")).is_err());
        assert!(line(&h, Duration::ZERO, Duration::ZERO, Some("a b")).is_err());
    }
}
