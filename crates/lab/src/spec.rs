//! What the user asks for: links (`NAME=RATE[,mtu=N][,offload=off][,switched]`) and the
//! targets to start behind each of them.
//!
//! Names end up inside interface names (`sbl-NAME-h`), and Linux allows 15 bytes there
//! (IFNAMSIZ 16 with the NUL), so a name is at most 8 characters of `[a-z0-9-]`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// Longest link name: `sbl-` + name + `-h` must fit in 15 bytes, with room to spare.
pub const MAX_NAME: usize = 8;
/// Most links one lab holds (one /24 of 10.213.0.0/16 each, see `addr`).
pub const MAX_LINKS: usize = 64;
/// Fastest rate accepted; htb takes 64-bit rates, but beyond this a software bed means nothing.
pub const MAX_RATE_BITS: u64 = 100_000_000_000;
/// Slowest rate accepted.
pub const MIN_RATE_BITS: u64 = 8_000;

/// One shaped link of the lab.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub name: String,
    /// Line rate in bits per second (decimal: 1gbit = 10^9), shaped in both directions.
    pub rate_bits: u64,
    pub mtu: u32,
    /// Segmentation and checksum offloads on (the kernel's default) or off.
    pub offload: bool,
    /// An extra forwarding element (a bridge in its own namespace) on the path.
    pub switched: bool,
}

impl LinkSpec {
    /// Parses `NAME=RATE[,mtu=N][,offload=off|on][,switched]`.
    pub fn parse(s: &str) -> Result<LinkSpec, LabError> {
        let bad = |reason: String| LabError::Spec {
            spec: s.to_string(),
            reason,
        };
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=RATE, e.g. ten=10gbit".into()))?;
        check_name(name).map_err(bad)?;
        let mut parts = rest.split(',');
        let rate = parts.next().unwrap_or("");
        let rate_bits = parse_rate(rate).map_err(bad)?;
        let mut spec = LinkSpec {
            name: name.to_string(),
            rate_bits,
            mtu: 1500,
            offload: true,
            switched: false,
        };
        for opt in parts {
            match opt.split_once('=') {
                Some(("mtu", v)) => {
                    spec.mtu = v
                        .parse()
                        .ok()
                        .filter(|m| (576..=65535).contains(m))
                        .ok_or_else(|| bad(format!("mtu '{v}' is not a number in 576-65535")))?;
                }
                Some(("offload", "off")) => spec.offload = false,
                Some(("offload", "on")) => spec.offload = true,
                Some(("offload", v)) => {
                    return Err(bad(format!("offload takes on or off, not '{v}'")))
                }
                None if opt == "switched" => spec.switched = true,
                None if opt == "direct" => spec.switched = false,
                _ => {
                    return Err(bad(format!(
                        "unknown option '{opt}' (options: mtu=N, offload=off, switched)"
                    )))
                }
            }
        }
        Ok(spec)
    }

    /// The rate as tc writes it ("10gbit", "100mbit", "1500kbit").
    pub fn rate(&self) -> String {
        format_rate(self.rate_bits)
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={},mtu={}", self.name, self.rate(), self.mtu)?;
        if !self.offload {
            f.write_str(",offload=off")?;
        }
        if self.switched {
            f.write_str(",switched")?;
        }
        Ok(())
    }
}

/// Parses a whole list of `--link` values: each valid, names unique, not too many.
pub fn parse_links(list: &[String]) -> Result<Vec<LinkSpec>, LabError> {
    if list.is_empty() {
        return Err(LabError::Input(
            "give at least one --link NAME=RATE (e.g. --link one=1gbit --link ten=10gbit)".into(),
        ));
    }
    if list.len() > MAX_LINKS {
        return Err(LabError::Input(format!(
            "{} links asked for; a lab holds at most {MAX_LINKS}",
            list.len()
        )));
    }
    let mut out: Vec<LinkSpec> = Vec::with_capacity(list.len());
    for s in list {
        let l = LinkSpec::parse(s)?;
        if out.iter().any(|o| o.name == l.name) {
            return Err(LabError::Spec {
                spec: s.clone(),
                reason: format!("a link named '{}' is given twice", l.name),
            });
        }
        out.push(l);
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the link name is empty".into());
    }
    if name.len() > MAX_NAME {
        return Err(format!(
            "link name '{name}' is longer than {MAX_NAME} characters (it becomes part of interface names)"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!("link name '{name}' may hold only a-z, 0-9 and '-'"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(format!("link name '{name}' may not start or end with '-'"));
    }
    Ok(())
}

/// Parses a rate the way tc spells it: `10gbit`, `1gbit`, `100mbit`, `64kbit`, `8000bit`
/// (decimal multiples, as line rates are quoted).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "rate '{s}' does not start with a number (e.g. 1gbit, 100mbit)"
        ));
    }
    let mult: u64 = match unit {
        "gbit" => 1_000_000_000,
        "mbit" => 1_000_000,
        "kbit" => 1_000,
        "bit" => 1,
        "" => return Err(format!("rate '{s}' needs a unit: gbit, mbit, kbit or bit")),
        other => {
            return Err(format!(
                "rate '{s}' has an unknown unit '{other}' (use gbit, mbit, kbit or bit)"
            ))
        }
    };
    let v: u64 = num
        .parse()
        .map_err(|_| format!("rate '{s}' is out of range"))?;
    let bits = v
        .checked_mul(mult)
        .ok_or_else(|| format!("rate '{s}' is out of range"))?;
    if !(MIN_RATE_BITS..=MAX_RATE_BITS).contains(&bits) {
        return Err(format!("rate '{s}' is outside 8kbit-100gbit"));
    }
    Ok(bits)
}

/// The shortest exact tc spelling of a rate.
pub fn format_rate(bits: u64) -> String {
    for (m, u) in [
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ] {
        if bits >= m && bits.is_multiple_of(m) {
            return format!("{}{u}", bits / m);
        }
    }
    format!("{bits}bit")
}

/// A target the lab can start inside each link's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// `sanbench serve nbd`, port 10809.
    Nbd,
    /// `sanbench serve iscsi`, port 3260.
    Iscsi,
    /// `sanbench serve nvme` (NVMe/TCP), port 4420.
    Nvme,
    /// `nbdkit memory`, port 10810 (reference peer).
    Nbdkit,
    /// tgtd with a RAM-backed LUN, port 3261 (reference peer).
    Tgtd,
}

impl TargetKind {
    pub const ALL: [TargetKind; 5] = [
        TargetKind::Nbd,
        TargetKind::Iscsi,
        TargetKind::Nvme,
        TargetKind::Nbdkit,
        TargetKind::Tgtd,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Nbd => "nbd",
            TargetKind::Iscsi => "iscsi",
            TargetKind::Nvme => "nvme",
            TargetKind::Nbdkit => "nbdkit",
            TargetKind::Tgtd => "tgtd",
        }
    }

    /// The TCP port it listens on inside the namespace.
    pub fn port(self) -> u16 {
        match self {
            TargetKind::Nbd => 10809,
            TargetKind::Iscsi => 3260,
            TargetKind::Nvme => 4420,
            TargetKind::Nbdkit => 10810,
            TargetKind::Tgtd => 3261,
        }
    }

    /// The program it needs besides sanbench itself, if any.
    pub fn program(self) -> Option<&'static str> {
        match self {
            TargetKind::Nbd | TargetKind::Iscsi | TargetKind::Nvme => None,
            TargetKind::Nbdkit => Some("nbdkit"),
            TargetKind::Tgtd => Some("tgtd"),
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses `nbd,iscsi,nvme,nbdkit,tgtd` (any subset, any order, no repeats).
pub fn parse_targets(s: &str) -> Result<Vec<TargetKind>, LabError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let k = TargetKind::ALL
            .into_iter()
            .find(|k| k.as_str() == part)
            .ok_or_else(|| {
                LabError::Input(format!(
                    "--targets: unknown target '{part}' (choose from nbd, iscsi, nvme, nbdkit, tgtd)"
                ))
            })?;
        if out.contains(&k) {
            return Err(LabError::Input(format!(
                "--targets: '{part}' is given twice"
            )));
        }
        out.push(k);
    }
    if out.is_empty() {
        return Err(LabError::Input(
            "--targets: give at least one of nbd, iscsi, nvme, nbdkit, tgtd".into(),
        ));
    }
    Ok(out)
}

/// Parses a RAM-disk size the way `sanbench serve --size` does: bytes, or `k`, `M`, `G`, `T`
/// (binary).
pub fn parse_size(s: &str) -> Result<u64, LabError> {
    let bad = || LabError::Input(format!("--size: '{s}' is not a size like 1G or 512M"));
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => return Err(bad()),
    };
    let v: u64 = num.parse().map_err(|_| bad())?;
    let bytes = v
        .checked_shl(shift)
        .filter(|b| b >> shift == v)
        .ok_or_else(bad)?;
    if bytes < 1 << 20 {
        return Err(LabError::Input(format!("--size: '{s}' is below 1M")));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let l = LinkSpec::parse("ten=10gbit").unwrap();
        assert_eq!(
            l,
            LinkSpec {
                name: "ten".into(),
                rate_bits: 10_000_000_000,
                mtu: 1500,
                offload: true,
                switched: false
            }
        );
        let l = LinkSpec::parse("j-1=1gbit,mtu=9000,offload=off,switched").unwrap();
        assert_eq!(l.rate_bits, 1_000_000_000);
        assert_eq!(l.mtu, 9000);
        assert!(!l.offload && l.switched);
        assert_eq!(l.to_string(), "j-1=1gbit,mtu=9000,offload=off,switched");
        assert_eq!(LinkSpec::parse("s=100mbit").unwrap().rate(), "100mbit");
        assert_eq!(LinkSpec::parse("s=1500kbit").unwrap().rate(), "1500kbit");
        assert_eq!(LinkSpec::parse("s=2500mbit").unwrap().rate(), "2500mbit");
    }

    #[test]
    fn bad_specs_say_why_in_one_line() {
        for (spec, words) in [
            ("ten", "NAME=RATE"),
            ("=1gbit", "empty"),
            ("Ten=1gbit", "a-z"),
            ("toolongname=1gbit", "longer than"),
            ("a_b=1gbit", "a-z"),
            ("-a=1gbit", "start or end"),
            ("a=", "number"),
            ("a=10", "needs a unit"),
            ("a=10gbps", "unknown unit"),
            ("a=1000gbit", "outside"),
            ("a=99999999999999999999gbit", "out of range"),
            ("a=1gbit,mtu=9", "576-65535"),
            ("a=1gbit,mtu=x", "576-65535"),
            ("a=1gbit,offload=maybe", "on or off"),
            ("a=1gbit,fast", "unknown option"),
        ] {
            let e = LinkSpec::parse(spec).unwrap_err().to_string();
            assert!(e.contains(words), "{spec}: {e}");
            assert!(e.starts_with("--link "), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn names_are_unique_and_lists_bounded() {
        let l = |v: &[&str]| parse_links(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(l(&["a=1gbit", "b=10gbit"]).unwrap().len(), 2);
        assert!(l(&["a=1gbit", "a=10gbit"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(l(&[]).is_err());
        let many: Vec<String> = (0..65).map(|i| format!("l{i}=1gbit")).collect();
        assert!(parse_links(&many).is_err());
    }

    #[test]
    fn target_lists() {
        assert_eq!(
            parse_targets("nbd,iscsi").unwrap(),
            vec![TargetKind::Nbd, TargetKind::Iscsi]
        );
        assert_eq!(parse_targets("tgtd, nbdkit").unwrap().len(), 2);
        assert!(parse_targets("nbd,nbd").is_err());
        assert!(parse_targets("fc").unwrap_err().to_string().contains("fc"));
        assert!(parse_targets("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert!(parse_size("1k").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn rates_round_trip() {
        for r in ["1gbit", "10gbit", "100mbit", "64kbit", "8001bit"] {
            assert_eq!(format_rate(parse_rate(r).unwrap()), r);
        }
    }
}
