//! The one number formatter of the terminal, the report and the charts.
//!
//! Each style below is a distinct spelling a reader sees; every caller picks one of them, none
//! writes its own:
//!
//! * [`si`], [`si_digits`]: a rate in a column (IOPS): whole up to a number of integer digits,
//!   then `k` with one decimal, `M` and `G` with two (`8747`, `12.3k`, `1.23M`).
//! * [`num`]: a figure in a sentence or a table of the report: thousands separated, about three
//!   significant digits below 100 (`95,000`, `12.3`, `1.23`, `0.012`), `n/a` when not finite.
//! * [`short`]: [`num`] without trailing zeros (`10`, `12.5`), for percentages and weights.
//! * [`si_short`]: a chart's tick, [`short`] with a `k` or `M` (`750`, `12k`, `2.5M`).
//! * [`bit_rate`], [`bit_rate_rounded`]: a link's rate in `Gbit/s` or `Mbit/s`.
//! * [`latency_ns`]: one latency in a line of text, unit chosen by size (`420 ns`, `3.4 µs`,
//!   `850 µs`, `1.23 ms`, `2.10 s`); [`latency_us_tick`] a chart's latency tick (`500 µs`,
//!   `2 ms`, `1.5 s`); [`us_column`] a table column already headed in µs (`850`, `12.3`).
//! * [`bytes_binary`]: an amount of data in binary units (`12.0 KiB`, `3.5 MiB`, `1.50 GiB`).
//! * [`span`]: a stretch of wall-clock time for people (`42s`, `12m05s`, `3h07m`).

/// A rate in a terminal column: whole below 10,000, then `k` with one decimal, `M` and `G`
/// with two: 8747 → "8747", 12345 → "12.3k", 1234567 → "1.23M". [`si_digits`] with 4.
pub fn si(v: f64) -> String {
    si_digits(v, 4)
}

/// [`si`] with the number written whole up to `digits` integer digits (the suffix starts at
/// 10^`digits`, at least at 1,000): `si_digits(1234.0, 3)` → "1.2k", `si_digits(1234.0, 4)` →
/// "1234". The thresholds apply to the magnitude, so negatives mirror positives. Not finite:
/// "NaN", "infG", "-infG" (as the terminal has always written them).
pub fn si_digits(v: f64, digits: u32) -> String {
    let a = v.abs();
    let k_from = 10f64.powi(digits.max(3) as i32);
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= k_from {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A figure for people: thousands separated, about three significant digits below 100:
/// 95000.4 → "95,000", 12.345 → "12.3", 1.234 → "1.23", 0.01234 → "0.012", 0 → "0"; not
/// finite: "n/a".
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        let s = format!("{:.0}", a);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if x < 0.0 {
            out.insert(0, '-');
        }
        out
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a == 0.0 {
        "0".into()
    } else {
        format!("{x:.3}")
    }
}

/// A round figure without trailing zeros ("10", "12.5"), for percentages and weights: [`num`]
/// trimmed.
pub fn short(x: f64) -> String {
    let s = num(x);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A chart's tick: [`short`] below 10,000, then in thousands (`k`) and millions (`M`):
/// "0", "750", "5,000", "12k", "12.5k", "3M", "2.25M". No `G`: a billion is "1,000M".
pub fn si_short(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", short(v / 1e3))
    } else {
        short(v)
    }
}

/// A link's rate, exact: 1e9 → "1 Gbit/s", 2.5e9 → "2.5 Gbit/s", 1e8 → "100 Mbit/s",
/// 1234567 → "1.234567 Mbit/s" (Rust's shortest spelling of the quotient).
pub fn bit_rate(bits: f64) -> String {
    if bits >= 1e9 {
        format!("{} Gbit/s", bits / 1e9)
    } else {
        format!("{} Mbit/s", bits / 1e6)
    }
}

/// [`bit_rate`] rounded to three decimals, trailing zeros dropped: 1234567 → "1.235 Mbit/s"
/// (a measured rate in a sentence, where [`bit_rate`] would print every digit).
pub fn bit_rate_rounded(bits: f64) -> String {
    let three = |x: f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if bits >= 1e9 {
        format!("{} Gbit/s", three(bits / 1e9))
    } else {
        format!("{} Mbit/s", three(bits / 1e6))
    }
}

/// A latency in a line of text: "420 ns", "3.4 µs", "850 µs", "1.23 ms", "2.10 s". A RAM
/// disk's sub-microsecond p99 is never rounded to "0 µs".
pub fn latency_ns(ns: u64) -> String {
    let us = ns as f64 / 1000.0;
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else if us >= 10.0 {
        format!("{us:.0} µs")
    } else if ns >= 1000 {
        format!("{us:.1} µs")
    } else {
        format!("{ns} ns")
    }
}

/// A latency on a chart's axis, in µs: "500 µs", "2 ms", "1.5 s" ([`short`] figures).
pub fn latency_us_tick(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", short(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", short(us / 1e3))
    } else {
        format!("{} µs", short(us))
    }
}

/// A latency in a table column headed in µs: whole from 100 µs, one decimal below.
pub fn us_column(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

/// An amount of data in binary units: "12.0 KiB", "3.5 MiB", "1.50 GiB".
pub fn bytes_binary(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}

/// A stretch of time for people, whole seconds: "42s", "12m05s", "3h07m".
pub fn span(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        use std::time::Duration;
        assert_eq!(span(Duration::from_millis(42_900)), "42s");
        assert_eq!(span(Duration::from_secs(725)), "12m05s");
        assert_eq!(span(Duration::from_secs(3 * 3600 + 7 * 60 + 59)), "3h07m");
    }

    #[test]
    fn latencies_and_bytes() {
        assert_eq!(latency_ns(420), "420 ns");
        assert_eq!(latency_ns(3_400), "3.4 µs");
        assert_eq!(latency_ns(850_000), "850 µs");
        assert_eq!(latency_ns(1_234_000), "1.23 ms");
        assert_eq!(latency_ns(2_100_000_000), "2.10 s");
        assert_eq!(latency_us_tick(500.0), "500 µs");
        assert_eq!(latency_us_tick(2_000.0), "2 ms");
        assert_eq!(latency_us_tick(1_500_000.0), "1.5 s");
        assert_eq!(us_column(850.4), "850");
        assert_eq!(us_column(12.34), "12.3");
        assert_eq!(bytes_binary(12 * 1024), "12.0 KiB");
        assert_eq!(bytes_binary(3 << 20 | 1 << 19), "3.5 MiB");
        assert_eq!(bytes_binary(3 << 29), "1.50 GiB");
    }

    #[test]
    fn si_columns() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(999.0), "999");
        assert_eq!(si(999.95), "1000");
        assert_eq!(si(1e3), "1000");
        assert_eq!(si(8747.0), "8747");
        assert_eq!(si(9999.4), "9999");
        assert_eq!(si(1e4), "10.0k");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(406_321.0), "406.3k");
        // Below the M threshold the k form rounds up to 1000.0k (as it always has).
        assert_eq!(si(999_999.0), "1000.0k");
        assert_eq!(si(1e6), "1.00M");
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(si(1_810_000.0), "1.81M");
        assert_eq!(si(1e9), "1.00G");
        assert_eq!(si(2.345e9), "2.35G");
        assert_eq!(si(-12_345.0), "-12.3k");
        assert_eq!(si(-999.0), "-999");
        assert_eq!(si(-2e6), "-2.00M");
        assert_eq!(si(f64::NAN), "NaN");
        assert_eq!(si(f64::INFINITY), "infG");
        assert_eq!(si(f64::NEG_INFINITY), "-infG");
    }

    #[test]
    fn si_digits_moves_the_k() {
        assert_eq!(si_digits(999.0, 3), "999");
        assert_eq!(si_digits(999.95, 3), "1000");
        assert_eq!(si_digits(1e3, 3), "1.0k");
        assert_eq!(si_digits(8747.0, 3), "8.7k");
        assert_eq!(si_digits(406_321.0, 3), "406.3k");
        assert_eq!(si_digits(1_810_000.0, 3), "1.81M");
        assert_eq!(si_digits(1e9, 3), "1.00G");
        assert_eq!(si_digits(-1500.0, 3), "-1.5k");
        // Fewer than three digits would write 0.1k: the k starts at 1,000 at the earliest.
        assert_eq!(si_digits(150.0, 1), "150");
        assert_eq!(si_digits(12_345.0, 5), "12345");
        assert_eq!(si_digits(123_456.0, 5), "123.5k");
        for v in [0.0, 999.0, 1e3, 9999.0, 1e4, 1e6, 1e9, -5e4] {
            assert_eq!(si_digits(v, 4), si(v), "{v}");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(num(95_000.4), "95,000");
        assert_eq!(num(1_234_567.0), "1,234,567");
        assert_eq!(num(-1234.0), "-1,234");
        assert_eq!(num(999.95), "1,000");
        assert_eq!(num(1e3), "1,000");
        assert_eq!(num(1e6), "1,000,000");
        assert_eq!(num(100.0), "100");
        assert_eq!(num(99.95), "100.0");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(-12.345), "-12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(0.01234), "0.012");
        assert_eq!(num(-0.5), "-0.500");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(f64::NAN), "n/a");
        assert_eq!(num(f64::INFINITY), "n/a");
        assert_eq!(num(f64::NEG_INFINITY), "n/a");
    }

    #[test]
    fn shorts() {
        assert_eq!(short(10.0), "10");
        assert_eq!(short(12.5), "12.5");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(1500.0), "1,500");
        assert_eq!(short(999.95), "1,000");
        assert_eq!(short(0.0), "0");
        assert_eq!(short(-2.50), "-2.5");
        assert_eq!(short(f64::NAN), "n/a");
    }

    #[test]
    fn ticks() {
        assert_eq!(si_short(0.0), "0");
        assert_eq!(si_short(750.0), "750");
        assert_eq!(si_short(999.95), "1,000");
        assert_eq!(si_short(1e3), "1,000");
        assert_eq!(si_short(5000.0), "5,000");
        assert_eq!(si_short(1e4), "10k");
        assert_eq!(si_short(12_000.0), "12k");
        assert_eq!(si_short(12_500.0), "12.5k");
        assert_eq!(si_short(406_321.0), "406k");
        assert_eq!(si_short(1e6), "1M");
        assert_eq!(si_short(2.25e6), "2.25M");
        assert_eq!(si_short(3e6), "3M");
        assert_eq!(si_short(1e9), "1,000M");
        assert_eq!(si_short(f64::NAN), "n/a");
        // Ticks are finite; an infinite one would read "n/aM" (as it always has).
        assert_eq!(si_short(f64::INFINITY), "n/aM");
    }

    #[test]
    fn rates() {
        assert_eq!(bit_rate(1e9), "1 Gbit/s");
        assert_eq!(bit_rate(2.5e9), "2.5 Gbit/s");
        assert_eq!(bit_rate(1e8), "100 Mbit/s");
        assert_eq!(bit_rate(0.0), "0 Mbit/s");
        assert_eq!(bit_rate(1_234_567.0), "1.234567 Mbit/s");
        assert_eq!(bit_rate_rounded(1e9), "1 Gbit/s");
        assert_eq!(bit_rate_rounded(2.5e9), "2.5 Gbit/s");
        assert_eq!(bit_rate_rounded(1e8), "100 Mbit/s");
        assert_eq!(bit_rate_rounded(0.0), "0 Mbit/s");
        assert_eq!(bit_rate_rounded(1_234_567.0), "1.235 Mbit/s");
        assert_eq!(bit_rate_rounded(999_999_999.0), "1000 Mbit/s");
    }
}
