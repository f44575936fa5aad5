//! Sizes (`512`, `4k`, `4KiB`, `1M`, `1.5G`) and durations (`500ms`, `5s`, `2m`, `1h`, `90`).
//!
//! Sizes with a unit are binary, as fio and Iometer mean them (4k = 4 KiB = 4096 bytes); `kB`,
//! `MB`, `GB` with a capital B after a lowercase or capital prefix, written with an explicit `B`
//! and no `i`, are still binary in fio. sanbench follows fio here so that specs carry over; the
//! decimal spellings `KB`/`MB` are accepted as binary too and documented as such. Output rates
//! are decimal MB/s with MiB/s beside them (docs/MEASURE.md).
//!
//! [`fmt`] is the other direction for numbers: the one formatter of the terminal, the report
//! and the charts; [`target`] parses target URIs as the user writes them.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod fmt;
pub mod target;

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

/// A byte count as users write it (`4k`, `1M`, `512`): parsed once, where it enters (a flag, a
/// spec file), and carried typed from there. Displays as [`format_size`] writes it; a spec
/// file may give it as a string or a bare number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl std::str::FromStr for Bytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Bytes, String> {
        parse_size(s).map(Bytes)
    }
}

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

/// A duration as users write it (`500ms`, `5s`, `2m`; a bare number is seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Dur, String> {
        parse_duration(s).map(Dur)
    }
}

impl std::fmt::Display for Dur {
    /// The shortest exact spelling [`parse_duration`] reads back: `1.5s`, `200ms`, `150us`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.0.as_nanos();
        if !ns.is_multiple_of(1_000_000) {
            write!(f, "{}us", ns as f64 / 1e3)
        } else if ns < 1_000_000_000 {
            write!(f, "{}ms", ns / 1_000_000)
        } else {
            write!(f, "{}s", ns as f64 / 1e9)
        }
    }
}

/// A percentage, 0 to 100 inclusive (`--read 70`, `--fua 12.5`).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Pct(pub f64);

impl std::str::FromStr for Pct {
    type Err = String;
    fn from_str(s: &str) -> Result<Pct, String> {
        let v: f64 = s
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| format!("'{s}' is not a number"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("{s} is not a percentage between 0 and 100"));
        }
        Ok(Pct(v))
    }
}

impl std::fmt::Display for Pct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The load levels of a response-time curve (`--curve 10,50,80,90,95,100`, a suite's
/// `curve = [...]`): percentages of a target's closed-loop maximum, each above 0 and at most
/// 200, kept ascending without repeats (the order a curve climbs in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadLevels(pub Vec<f64>);

impl LoadLevels {
    /// Checks levels given as numbers and puts them in order.
    pub fn new(mut v: Vec<f64>) -> Result<LoadLevels, String> {
        if let Some(x) = v
            .iter()
            .find(|x| !(x.is_finite() && **x > 0.0 && **x <= 200.0))
        {
            return Err(format!("{x} is not a load level between 0 and 200 %"));
        }
        v.sort_by(f64::total_cmp);
        v.dedup();
        Ok(LoadLevels(v))
    }
}

impl std::str::FromStr for LoadLevels {
    type Err = String;
    /// `PCT,PCT,...`, each optionally with a `%`.
    fn from_str(s: &str) -> Result<LoadLevels, String> {
        let v = s
            .split(',')
            .map(|x| {
                x.trim()
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .map_err(|_| format!("'{x}' is not a percentage"))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        LoadLevels::new(v)
    }
}

/// Spec files write sizes and durations as strings (`"4k"`, `"5s"`) or bare numbers (bytes,
/// seconds); both deserialize through the one parser.
macro_rules! human_serde {
    ($t:ty, $what:literal, $from_num:expr) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$t, E> {
                        $from_num(v as f64).map_err(E::custom)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$t, E> {
                        $from_num(v as f64).map_err(E::custom)
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$t, E> {
                        $from_num(v).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

human_serde!(
    Bytes,
    "a size such as \"4k\" or a number of bytes",
    |v: f64| -> Result<Bytes, String> {
        if v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64 {
            Ok(Bytes(v as u64))
        } else {
            Err(format!(
                "size {v} is not a whole, non-negative number of bytes"
            ))
        }
    }
);
human_serde!(
    Dur,
    "a duration such as \"5s\" or a number of seconds",
    |v: f64| -> Result<Dur, String> { parse_duration(&v.to_string()).map(Dur) }
);

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
    #[test]
    fn typed_values_parse_once_and_read_back() {
        assert_eq!("4k".parse::<Bytes>().unwrap(), Bytes(4096));
        assert_eq!(Bytes(3 << 30).to_string(), "3GiB");
        for d in ["1.5s", "200ms", "150us", "2s", "0s", "90s"] {
            let v: Dur = d.parse().unwrap();
            assert_eq!(v.to_string().parse::<Dur>().unwrap(), v, "{d}");
        }
        assert_eq!("200ms".parse::<Dur>().unwrap().to_string(), "200ms");
        assert_eq!("70".parse::<Pct>().unwrap(), Pct(70.0));
        assert!("150"
            .parse::<Pct>()
            .unwrap_err()
            .contains("between 0 and 100"));
        assert!("-1".parse::<Pct>().is_err());
        assert!("x".parse::<Pct>().is_err());
        #[derive(Deserialize)]
        struct T {
            a: Bytes,
            b: Bytes,
            c: Dur,
            d: Dur,
        }
        let t: T = toml::from_str("a = \"1M\"\nb = 512\nc = \"5s\"\nd = 2.5").unwrap();
        assert_eq!((t.a, t.b), (Bytes(1 << 20), Bytes(512)));
        assert_eq!(
            (t.c.0, t.d.0),
            (Duration::from_secs(5), Duration::from_millis(2500))
        );
        assert!(toml::from_str::<T>("a = \"4q\"\nb = 1\nc = 1\nd = 1").is_err());
        assert!(toml::from_str::<T>("a = -4\nb = 1\nc = 1\nd = 1").is_err());
    }

    #[test]
    fn load_levels_parse_once_in_order() {
        let l: LoadLevels = "90, 10%,50,10".parse().unwrap();
        assert_eq!(l, LoadLevels(vec![10.0, 50.0, 90.0]));
        assert_eq!("200".parse::<LoadLevels>().unwrap().0, [200.0]);
        assert!("10,abc"
            .parse::<LoadLevels>()
            .unwrap_err()
            .contains("'abc' is not a percentage"));
        for bad in ["0,50", "201", "-5", "nan", "inf", "", "10,,20"] {
            assert!(bad.parse::<LoadLevels>().is_err(), "{bad}");
        }
        assert!(LoadLevels::new(vec![f64::NAN]).is_err());
        assert_eq!(LoadLevels::new(vec![]).unwrap().0, Vec::<f64>::new());
    }
}
