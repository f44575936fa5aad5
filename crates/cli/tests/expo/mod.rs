//! A strict reading of the two text formats the metrics endpoints speak, for the tests:
//! the Prometheus text exposition format 0.0.4 and OpenMetrics 1.0.
//!
//! Both: `# TYPE`/`# HELP` before a family's samples, names and label names of the allowed
//! characters, label values quoted with only `\\`, `\"`, `\n` escapes, values that are
//! numbers or +Inf, histograms' buckets cumulative and ending in +Inf equal to _count.
//! OpenMetrics besides: a counter's family is named without `_total` and its samples with it,
//! `# UNIT` is a suffix of its family's name, a family's samples are not interleaved with
//! another's, and the text ends with `# EOF`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;

/// One sample: metric name, labels, value.
pub type Sample = (String, BTreeMap<String, String>, f64);

/// GET `url`'s path on `port` with an optional Accept: the Content-Type and the body of a
/// 200 answer (`None` when nothing answers).
pub fn get(port: u16, path: &str, accept: Option<&str>) -> Option<(String, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    let (head, body) = s.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or_default()
        .to_string();
    Some((ctype, body.to_string()))
}

fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn labels_of(line: &str, body: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = body.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        assert!(name_ok(&key), "label name {key:?}: {line}");
        assert_eq!(chars.next(), Some('"'), "{line}");
        let mut v = String::new();
        loop {
            match chars
                .next()
                .unwrap_or_else(|| panic!("unterminated: {line}"))
            {
                '\\' => match chars.next() {
                    Some('\\') => v.push('\\'),
                    Some('"') => v.push('"'),
                    Some('n') => v.push('\n'),
                    e => panic!("escape {e:?}: {line}"),
                },
                '"' => break,
                c => v.push(c),
            }
        }
        assert!(labels.insert(key, v).is_none(), "{line}");
        match chars.next() {
            None => break,
            Some(',') => {}
            c => panic!("after a label {c:?}: {line}"),
        }
    }
    labels
}

/// Parses `text` strictly as OpenMetrics (`om`) or Prometheus 0.0.4 text.
pub fn parse(text: &str, om: bool) -> Vec<Sample> {
    let text = if om {
        text.strip_suffix("# EOF\n")
            .unwrap_or_else(|| panic!("OpenMetrics ends with # EOF: {text}"))
    } else {
        assert!(!text.contains("# EOF"), "{text}");
        text
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut current = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut w = rest.splitn(3, ' ');
            let (kind, name, what) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
            assert!(name_ok(name), "{line}");
            match kind {
                "HELP" => {}
                "TYPE" => {
                    assert!(["counter", "gauge", "histogram"].contains(&what), "{line}");
                    assert!(types.insert(name.into(), what.into()).is_none(), "{line}");
                    if om && what == "counter" {
                        assert!(!name.ends_with("_total"), "{line}");
                    }
                    if !om && what == "counter" {
                        assert!(name.ends_with("_total"), "{line}");
                    }
                }
                "UNIT" if om => {
                    assert!(name.ends_with(&format!("_{what}")), "{line}");
                    units.insert(name.into(), what.into());
                }
                _ => panic!("unknown comment: {line}"),
            }
            continue;
        }
        assert!(!line.is_empty() && !line.starts_with('#'), "{line:?}");
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value: {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                (n, labels_of(line, body))
            }
        };
        let family = ["_bucket", "_sum", "_count", "_total"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s).filter(|f| {
                    types.get(*f).is_some_and(|t| {
                        t == "histogram" && *s != "_total" || t == "counter" && *s == "_total"
                    })
                })
            })
            .unwrap_or(name);
        let ty = types
            .get(family)
            .unwrap_or_else(|| panic!("no TYPE before {line}"));
        if om {
            assert!(ty != "counter" || name.ends_with("_total"), "{line}");
            if family != current {
                assert!(
                    done.insert(family.to_string()),
                    "interleaved family: {line}"
                );
                current = family.to_string();
            }
        }
        out.push((name.to_string(), labels, value));
    }
    // Histograms: per series, buckets cumulative, +Inf last and equal to _count.
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    for (n, l, v) in &out {
        let mut key = l.clone();
        if let Some(le) = key.remove("le") {
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            buckets
                .entry(format!("{n}{key:?}"))
                .or_default()
                .push((le, *v));
        } else if let Some(f) = n.strip_suffix("_count") {
            counts.insert(format!("{f}_bucket{key:?}"), *v);
        }
    }
    for (k, b) in &buckets {
        assert!(
            b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{k}: {b:?}"
        );
        assert_eq!(b.last().unwrap().0, f64::INFINITY, "{k}");
        assert_eq!(Some(&b.last().unwrap().1), counts.get(k), "{k}");
    }
    // Every family whose name ends with a unit sanbench uses states it in OpenMetrics.
    if om {
        for name in types.keys() {
            for unit in ["seconds", "bytes", "watts", "ratio"] {
                if name.ends_with(&format!("_{unit}")) {
                    assert_eq!(units.get(name).map(String::as_str), Some(unit), "{name}");
                }
            }
        }
    }
    out
}

/// The sum of the samples named `name` whose labels include `with`.
pub fn total(s: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    s.iter()
        .filter(|x| {
            x.0 == name
                && with
                    .iter()
                    .all(|(k, v)| x.1.get(*k).is_some_and(|x| x == v))
        })
        .map(|x| x.2)
        .sum()
}
