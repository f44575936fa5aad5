//! Sizes (`512`, `4k`, `4KiB`, `1M`, `1.5G`) and durations (`500ms`, `5s`, `2m`, `1h`, `90`).
//!
//! Sizes with a unit are binary, as fio and Iometer mean them (4k = 4 KiB = 4096 bytes); `kB`,
//! `MB`, `GB` with a capital B after a lowercase or capital prefix, written with an explicit `B`
//! and no `i`, are still binary in fio. sanbench follows fio here so that specs carry over; the
//! decimal spellings `KB`/`MB` are accepted as binary too and documented as such. Output rates
//! are decimal MB/s with MiB/s beside them (docs/MEASURE.md).

use std::time::Duration;

/// Parses a size in bytes. Bare numbers are bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("size '{s}' does not start with a number"));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        "p" | "pb" | "pib" => 1 << 50,
        other => {
            return Err(format!(
                "size '{s}' has an unknown unit '{other}' (use B, k, M, G, T, P)"
            ))
        }
    };
    if num.contains('.') {
        let v: f64 = num
            .parse()
            .map_err(|_| format!("size '{s}' is not a number"))?;
        let bytes = v * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
            return Err(format!("size '{s}' is out of range"));
        }
        if bytes.fract() != 0.0 {
            return Err(format!("size '{s}' is not a whole number of bytes"));
        }
        Ok(bytes as u64)
    } else {
        let v: u64 = num
            .parse()
            .map_err(|_| format!("size '{s}' is not a number"))?;
        v.checked_mul(mult)
            .ok_or_else(|| format!("size '{s}' is out of range"))
    }
}

/// Parses a duration. Bare numbers are seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("duration '{s}' does not start with a number"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("duration '{s}' is not a number"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => {
            return Err(format!(
                "duration '{s}' has an unknown unit '{other}' (use ms, s, m, h)"
            ))
        }
    };
    if !secs.is_finite() || !(0.0..=365.0 * 86400.0).contains(&secs) {
        return Err(format!("duration '{s}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Formats a byte count the way sizes are written in specs: `4KiB`, `1MiB`, `512B`.
pub fn format_size(b: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "PiB"),
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (m, u) in UNITS {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{}", b / m, u);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2 MiB").unwrap(), 2 << 20);
        assert!(parse_size("").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("-4k").is_err());
        assert!(parse_size("99999999999P").is_err());
        assert!(parse_size("0.3k").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn format_roundtrip() {
        for b in [512u64, 4096, 65536, 1 << 20, 3 << 30, 1000] {
            assert_eq!(parse_size(&format_size(b)).unwrap(), b);
        }
    }
}
