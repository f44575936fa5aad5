//! fio's value syntax: sizes with `kb_base` (fio's `__get_mult_bytes` in parse.c), times with a
//! default unit of seconds, booleans, integer percentages, and the `read,write[,trim]` lists
//! that many options take.
//!
//! With the default `kb_base=1024`, fio reads SI prefixes (`k`, `kB`, `M`) as powers of two and
//! IEC prefixes (`KiB`) as powers of ten, "to avoid breaking old scripts" (fio's HOWTO); with
//! `kb_base=1000` the reverse. sanbench's own units (units.rs) are always binary, so a fio
//! value is read here, by fio's rule, and never by `units::parse_size`.

use std::time::Duration;

/// Parses a size as fio does with the given `kb_base` (1024 or 1000). Hex (`0x10`) is allowed;
/// fio's arithmetic expressions (`(1+2)k`) and percentages are not sizes here.
pub fn size(s: &str, kb_base: u64) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('(') {
        return Err(format!("'{s}': fio arithmetic expressions are not read"));
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("'{s}' is not a size"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("'{s}' is not a size"));
    }
    let unit = unit.trim().to_ascii_lowercase();
    if unit.starts_with('%') {
        return Err(format!("'{s}': a percentage of the file is not read"));
    }
    // SI and IEC prefixes swap their bases between kb_base 1024 and 1000, as in fio.
    let iec = unit.len() >= 3 && unit.as_bytes()[1] == b'i';
    let base = match (iec, kb_base) {
        (true, 1024) => 1000,
        (true, _) => 1024,
        (false, b) => b,
    };
    let pow = match unit.chars().next() {
        None => 0,
        Some('b') if unit == "b" => 0,
        Some('k') => 1,
        Some('m') => 2,
        Some('g') => 3,
        Some('t') => 4,
        Some('p') => 5,
        _ => return Err(format!("'{s}' has an unknown unit '{unit}'")),
    };
    let rest = &unit[1.min(unit.len())..];
    if pow > 0 && !matches!(rest, "" | "b" | "ib") {
        return Err(format!("'{s}' has an unknown unit '{unit}'"));
    }
    let mult = base.pow(pow);
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
        let b = v * mult as f64;
        if !b.is_finite() || b >= u64::MAX as f64 || b.fract() != 0.0 {
            return Err(format!("'{s}' is not a whole number of bytes"));
        }
        Ok(b as u64)
    } else {
        num.parse::<u64>()
            .ok()
            .and_then(|v| v.checked_mul(mult))
            .ok_or_else(|| format!("'{s}' is out of range"))
    }
}

/// Parses a time; a bare number is seconds (fio's `runtime`, `ramp_time`).
pub fn time(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let ns_per: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        u => return Err(format!("'{s}' has an unknown time unit '{u}'")),
    };
    let ns = if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| format!("'{s}' is not a time"))?;
        let ns = (v * ns_per as f64).round();
        if !ns.is_finite() || ns >= u64::MAX as f64 {
            return Err(format!("'{s}' is out of range"));
        }
        ns as u64
    } else {
        // Whole numbers exactly, so that a written time reads back as itself.
        num.parse::<u64>()
            .ok()
            .and_then(|v| v.checked_mul(ns_per))
            .ok_or_else(|| format!("'{s}' is not a time"))?
    };
    if ns > 365 * 86_400_000_000_000 {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(Duration::from_nanos(ns))
}

/// Writes a time the way [`time`] reads it back exactly.
pub fn fmt_time(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else {
        // fio's smallest time unit; below it the value is rounded (the caller says so).
        format!("{}us", ns / 1000)
    }
}

/// A boolean option: no value means set.
pub fn boolean(v: Option<&str>) -> Result<bool, String> {
    match v.map(str::trim) {
        None | Some("1") | Some("true") | Some("on") | Some("yes") => Ok(true),
        Some("0") | Some("false") | Some("off") | Some("no") => Ok(false),
        Some(o) => Err(format!("'{o}' is not 0 or 1")),
    }
}

/// An unsigned integer (fio's plain ints; a size suffix is not allowed here).
pub fn uint(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))
}

/// A whole percentage 0..=100 (fio's rwmixread, percentage_random, ...).
pub fn pct(s: &str) -> Result<u64, String> {
    let v = uint(s.trim().trim_end_matches('%'))?;
    if v > 100 {
        return Err(format!("{v} is not a percentage between 0 and 100"));
    }
    Ok(v)
}

/// fio's per-direction list `read[,write[,trim]]`: an empty field keeps its default; a single
/// value applies to all directions (fio's HOWTO, "bs=256k means 256k for reads, writes and
/// trims"); with two, trim takes the write value. Returns (read, write).
pub fn per_ddir(s: &str) -> (Option<&str>, Option<&str>) {
    let mut it = s.split(',').map(str::trim);
    let r = it.next().filter(|v| !v.is_empty());
    match it.next() {
        None => (r, r),
        Some(w) => (r, Some(w).filter(|v| !v.is_empty())),
    }
}

/// Splits a `filename` list on `:` not escaped as `\:`, and unescapes (fio: "the colon must be
/// escaped with a '\' character", e.g. Windows drives and URIs).
pub fn filenames(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                cur.push(':');
                chars.next();
            }
            ':' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|f| !f.is_empty());
    out
}

/// The inverse of [`filenames`] for one name.
pub fn escape_filename(s: &str) -> String {
    s.replace(':', "\\:")
}

/// Writes a byte count with the largest binary suffix fio reads back exactly under the
/// default `kb_base=1024` (`4k`, `1m`, `512`).
pub fn fmt_size(b: u64) -> String {
    for (shift, u) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if b >= 1 << shift && b.is_multiple_of(1u64 << shift) {
            return format!("{}{u}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_kb_base() {
        let c = |s| size(s, 1024).unwrap();
        assert_eq!(c("4k"), 4096);
        assert_eq!(c("4K"), 4096);
        assert_eq!(c("4kB"), 4096);
        assert_eq!(c("4KiB"), 4000, "fio's compatibility mode: IEC is decimal");
        assert_eq!(c("1m"), 1 << 20);
        assert_eq!(c("1g"), 1 << 30);
        assert_eq!(c("512"), 512);
        assert_eq!(c("0x1000"), 4096);
        assert_eq!(c("1.5k"), 1536);
        assert_eq!(size("4k", 1000).unwrap(), 4000);
        assert_eq!(size("4KiB", 1000).unwrap(), 4096);
        for bad in ["", "k", "4q", "10%", "(1+2)k", "4kx", "1.1"] {
            assert!(size(bad, 1024).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times_default_to_seconds() {
        assert_eq!(time("60").unwrap(), Duration::from_secs(60));
        assert_eq!(time("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(time("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(time("250us").unwrap(), Duration::from_micros(250));
        assert!(time("5x").is_err());
        for d in [1500, 2000, 30_000, 1] {
            let d = Duration::from_millis(d);
            assert_eq!(time(&fmt_time(d)).unwrap(), d);
        }
    }

    #[test]
    fn lists_and_names() {
        assert_eq!(per_ddir("4k"), (Some("4k"), Some("4k")));
        assert_eq!(per_ddir("4k,64k"), (Some("4k"), Some("64k")));
        assert_eq!(per_ddir(",64k"), (None, Some("64k")));
        assert_eq!(per_ddir("4k,"), (Some("4k"), None));
        assert_eq!(filenames("/a:/b"), vec!["/a", "/b"]);
        assert_eq!(
            filenames("iscsi\\://h/iqn.x\\:y/1"),
            vec!["iscsi://h/iqn.x:y/1"]
        );
        assert_eq!(filenames(&escape_filename("c:/x")), vec!["c:/x"]);
        for b in [512, 4096, 65536, 1 << 20, 3 << 30, 1000] {
            assert_eq!(size(&fmt_size(b), 1024).unwrap(), b);
        }
    }
}
