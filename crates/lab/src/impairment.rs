//! What a fault does to a link ([`FaultAction`]), what a link suffers after its faults
//! ([`Impairment`], recorded in the state file), and the duration spelling both use.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// Longest delay `delay=D` takes.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// What a fault does to a link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultAction {
    /// Every packet dropped without a word, both directions.
    Down,
    /// Packets flow again (loss and delay set before `down` stay).
    Up,
    /// This share of packets lost, each direction (0 removes the loss).
    Loss(f64),
    /// Each packet held this long, each direction (0 removes the delay).
    Delay(Duration),
    /// No fault at all.
    Clear,
}

impl FaultAction {
    /// Parses `down`, `up`, `loss=PCT` (`5`, `0.5%`), `delay=D` (`10ms`, `250us`), `clear`.
    pub fn parse(s: &str) -> Result<FaultAction, LabError> {
        let bad = |why: String| LabError::Input(format!("fault action '{s}': {why}"));
        match s.split_once('=') {
            None => match s {
                "down" => Ok(FaultAction::Down),
                "up" => Ok(FaultAction::Up),
                "clear" => Ok(FaultAction::Clear),
                _ => Err(bad(
                    "unknown (use down, up, loss=PCT, delay=D or clear)".into()
                )),
            },
            Some(("loss", v)) => {
                let n = v.strip_suffix('%').unwrap_or(v);
                let p: f64 = n
                    .parse()
                    .ok()
                    .filter(|p: &f64| (0.0..=100.0).contains(p))
                    .ok_or_else(|| bad(format!("'{v}' is not a percentage from 0 to 100")))?;
                Ok(FaultAction::Loss(p))
            }
            Some(("delay", v)) => {
                let d = parse_duration(v).map_err(bad)?;
                if d > MAX_DELAY {
                    return Err(bad(format!("more than {} s of delay", MAX_DELAY.as_secs())));
                }
                Ok(FaultAction::Delay(d))
            }
            Some(_) => Err(bad(
                "unknown (use down, up, loss=PCT, delay=D or clear)".into()
            )),
        }
    }
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultAction::Down => f.write_str("down"),
            FaultAction::Up => f.write_str("up"),
            FaultAction::Clear => f.write_str("clear"),
            FaultAction::Loss(p) => write!(f, "loss={p}%"),
            FaultAction::Delay(d) => write!(f, "delay={}", format_duration(*d)),
        }
    }
}

/// Parses `10s`, `2.5s`, `1500ms`, `250us`, `1m` (a unit is required: tc reads a bare number
/// as microseconds, sanbench's flags as seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration like 10s, 1500ms or 250us"))?;
    let secs = match unit {
        "us" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        "m" => v * 60.0,
        "" if v == 0.0 => 0.0,
        "" => return Err(format!("'{s}' needs a unit: us, ms, s or m")),
        _ => return Err(format!("'{s}' has an unknown unit (use us, ms, s or m)")),
    };
    if !secs.is_finite() || secs > 86_400.0 {
        return Err(format!("'{s}' is out of range"));
    }
    // Whole microseconds: what tc takes, and what the schedule can keep to anyway.
    Ok(Duration::from_micros((secs * 1e6).round() as u64))
}

/// The shortest exact spelling of a duration in whole microseconds (`10ms`, `1500us`, `2s`).
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".into()
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1_000) {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

/// What a link suffers now: the result of every fault since the lab came up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Impairment {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub down: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_us: Option<u64>,
}

impl Impairment {
    pub fn is_clear(&self) -> bool {
        *self == Impairment::default()
    }

    /// The impairment after `a`.
    pub fn after(&self, a: FaultAction) -> Impairment {
        let mut n = self.clone();
        match a {
            FaultAction::Down => n.down = true,
            FaultAction::Up => n.down = false,
            FaultAction::Clear => n = Impairment::default(),
            FaultAction::Loss(p) => n.loss_pct = (p > 0.0).then_some(p),
            FaultAction::Delay(d) => n.delay_us = (!d.is_zero()).then_some(d.as_micros() as u64),
        }
        n
    }

    /// `down`, `up`, or `up, loss 5%, delay 10ms`.
    pub fn describe(&self) -> String {
        let mut s = String::from(if self.down { "down" } else { "up" });
        if let Some(p) = self.loss_pct {
            s.push_str(&format!(", loss {p}%"));
        }
        if let Some(d) = self.delay_us {
            s.push_str(&format!(
                ", delay {}",
                format_duration(Duration::from_micros(d))
            ));
        }
        s
    }
}
