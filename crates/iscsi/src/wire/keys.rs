//! Login/Text keys and their negotiation rules (RFC 7143 §6.2, §13).
//!
//! [`respond`] is the responder side of one key: given what the originator offered and what we
//! accept, it returns the value to answer with. [`SessionParams`] collects the outcome of a
//! negotiation as typed values, with the RFC defaults.

use super::WireError;

/// How a key's value is negotiated (§6.2.1, §6.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Comma-separated list in order of preference; the responder picks the first it supports.
    List,
    /// A declaration, not a negotiation: each side states its own value.
    Declarative,
    /// Boolean, result is AND of both sides.
    And,
    /// Boolean, result is OR of both sides.
    Or,
    /// Numerical, result is the smaller value.
    Min,
    /// Numerical, result is the larger value.
    Max,
}

/// Where a key may appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only in the first login of a session (leading only).
    Leading,
    /// Any login of the session (connection-only keys included).
    Login,
    /// Login or full-feature Text negotiation.
    Any,
}

/// Definition of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDef {
    pub name: &'static str,
    pub rule: Rule,
    pub scope: Scope,
    /// Valid range for numerical keys.
    pub range: (u64, u64),
}

const fn k(name: &'static str, rule: Rule, scope: Scope, lo: u64, hi: u64) -> KeyDef {
    KeyDef {
        name,
        rule,
        scope,
        range: (lo, hi),
    }
}

const U24: u64 = (1 << 24) - 1;

/// Every key this crate negotiates.
pub const KEYS: &[KeyDef] = &[
    k("HeaderDigest", Rule::List, Scope::Login, 0, 0),
    k("DataDigest", Rule::List, Scope::Login, 0, 0),
    k("MaxConnections", Rule::Min, Scope::Leading, 1, 65535),
    k("SendTargets", Rule::Declarative, Scope::Any, 0, 0),
    k("TargetName", Rule::Declarative, Scope::Leading, 0, 0),
    k("InitiatorName", Rule::Declarative, Scope::Leading, 0, 0),
    k("TargetAlias", Rule::Declarative, Scope::Any, 0, 0),
    k("InitiatorAlias", Rule::Declarative, Scope::Any, 0, 0),
    k("TargetAddress", Rule::Declarative, Scope::Any, 0, 0),
    k(
        "TargetPortalGroupTag",
        Rule::Declarative,
        Scope::Login,
        0,
        65535,
    ),
    k("InitialR2T", Rule::Or, Scope::Leading, 0, 0),
    k("ImmediateData", Rule::And, Scope::Leading, 0, 0),
    k(
        "MaxRecvDataSegmentLength",
        Rule::Declarative,
        Scope::Any,
        512,
        U24,
    ),
    k("MaxBurstLength", Rule::Min, Scope::Leading, 512, U24),
    k("FirstBurstLength", Rule::Min, Scope::Leading, 512, U24),
    k("DefaultTime2Wait", Rule::Max, Scope::Leading, 0, 3600),
    k("DefaultTime2Retain", Rule::Min, Scope::Leading, 0, 3600),
    k("MaxOutstandingR2T", Rule::Min, Scope::Leading, 1, 65535),
    k("DataPDUInOrder", Rule::Or, Scope::Leading, 0, 0),
    k("DataSequenceInOrder", Rule::Or, Scope::Leading, 0, 0),
    k("ErrorRecoveryLevel", Rule::Min, Scope::Leading, 0, 2),
    k("SessionType", Rule::Declarative, Scope::Leading, 0, 0),
    k("AuthMethod", Rule::List, Scope::Login, 0, 0),
    k("IFMarker", Rule::And, Scope::Login, 0, 0),
    k("OFMarker", Rule::And, Scope::Login, 0, 0),
    k("CHAP_A", Rule::List, Scope::Login, 0, 0),
    k("CHAP_I", Rule::Declarative, Scope::Login, 0, 255),
    k("CHAP_C", Rule::Declarative, Scope::Login, 0, 0),
    k("CHAP_N", Rule::Declarative, Scope::Login, 0, 0),
    k("CHAP_R", Rule::Declarative, Scope::Login, 0, 0),
];

/// Looks a key up; `None` means the key is not understood (answer `key=NotUnderstood`).
pub fn key_def(name: &str) -> Option<&'static KeyDef> {
    KEYS.iter().find(|d| d.name == name)
}

fn key_err(key: &str, reason: impl Into<String>) -> WireError {
    WireError::Key {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// Parses a boolean value.
pub fn parse_bool(key: &str, v: &str) -> Result<bool, WireError> {
    match v {
        "Yes" => Ok(true),
        "No" => Ok(false),
        _ => Err(key_err(key, format!("{v:?} is not Yes or No"))),
    }
}

fn bool_str(b: bool) -> &'static str {
    if b {
        "Yes"
    } else {
        "No"
    }
}

/// Parses a numerical value (decimal or 0x hex, §5.1) and checks it against the key's range.
pub fn parse_num(def: &KeyDef, v: &str) -> Result<u64, WireError> {
    let n = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        v.parse::<u64>()
    }
    .map_err(|_| key_err(def.name, format!("{v:?} is not a number")))?;
    if n < def.range.0 || n > def.range.1 {
        return Err(key_err(
            def.name,
            format!("{n} outside {}..={}", def.range.0, def.range.1),
        ));
    }
    Ok(n)
}

/// Responder side of one key: `offered` is the originator's value, `ours` what we support
/// (a list for list keys, our limit for numerical keys, our value for booleans). Returns the
/// answer; for a list with nothing in common the answer is `Reject` (§6.2.1).
pub fn respond(def: &KeyDef, offered: &str, ours: &str) -> Result<String, WireError> {
    Ok(match def.rule {
        Rule::List => {
            let our: Vec<&str> = ours.split(',').collect();
            offered
                .split(',')
                .find(|o| our.contains(o))
                .unwrap_or("Reject")
                .to_string()
        }
        Rule::Declarative => ours.to_string(),
        Rule::And => bool_str(parse_bool(def.name, offered)? && parse_bool(def.name, ours)?).into(),
        Rule::Or => bool_str(parse_bool(def.name, offered)? || parse_bool(def.name, ours)?).into(),
        Rule::Min => parse_num(def, offered)?
            .min(parse_num(def, ours)?)
            .to_string(),
        Rule::Max => parse_num(def, offered)?
            .max(parse_num(def, ours)?)
            .to_string(),
    })
}

/// Originator side: checks that `answer` is a legal outcome of our `offered` value and returns
/// the negotiated value.
pub fn accept(def: &KeyDef, offered: &str, answer: &str) -> Result<String, WireError> {
    match def.rule {
        Rule::List => {
            if answer == "Reject" || !offered.split(',').any(|o| o == answer) {
                return Err(key_err(
                    def.name,
                    format!("answer {answer:?} not among {offered:?}"),
                ));
            }
        }
        Rule::And => {
            if parse_bool(def.name, answer)? && !parse_bool(def.name, offered)? {
                return Err(key_err(def.name, "AND result Yes for our No"));
            }
        }
        Rule::Or => {
            if !parse_bool(def.name, answer)? && parse_bool(def.name, offered)? {
                return Err(key_err(def.name, "OR result No for our Yes"));
            }
        }
        Rule::Min => {
            if parse_num(def, answer)? > parse_num(def, offered)? {
                return Err(key_err(def.name, "answer above our offer"));
            }
        }
        Rule::Max => {
            if parse_num(def, answer)? < parse_num(def, offered)? {
                return Err(key_err(def.name, "answer below our offer"));
            }
        }
        Rule::Declarative => {}
    }
    Ok(answer.to_string())
}

/// Negotiated operational parameters of a session and connection (defaults from §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionParams {
    pub header_digest: bool,
    pub data_digest: bool,
    pub max_connections: u32,
    pub initial_r2t: bool,
    pub immediate_data: bool,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub default_time2wait: u32,
    pub default_time2retain: u32,
    pub max_outstanding_r2t: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
    pub error_recovery_level: u32,
    /// The peer's declared MaxRecvDataSegmentLength: the most we may send in one PDU.
    pub peer_max_recv_data_segment_length: u32,
    /// Our declared MaxRecvDataSegmentLength: the most the peer may send us.
    pub our_max_recv_data_segment_length: u32,
}

impl Default for SessionParams {
    fn default() -> Self {
        SessionParams {
            header_digest: false,
            data_digest: false,
            max_connections: 1,
            initial_r2t: true,
            immediate_data: true,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            default_time2wait: 2,
            default_time2retain: 20,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            error_recovery_level: 0,
            peer_max_recv_data_segment_length: 8192,
            our_max_recv_data_segment_length: 8192,
        }
    }
}

impl SessionParams {
    /// Records a negotiated value (the result, not an offer). Unknown keys are ignored.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<(), WireError> {
        let Some(def) = key_def(key) else {
            return Ok(());
        };
        let num = |v: &str| parse_num(def, v).map(|n| n as u32);
        match key {
            "HeaderDigest" => self.header_digest = value == "CRC32C",
            "DataDigest" => self.data_digest = value == "CRC32C",
            "MaxConnections" => self.max_connections = num(value)?,
            "InitialR2T" => self.initial_r2t = parse_bool(key, value)?,
            "ImmediateData" => self.immediate_data = parse_bool(key, value)?,
            "MaxBurstLength" => self.max_burst_length = num(value)?,
            "FirstBurstLength" => self.first_burst_length = num(value)?,
            "DefaultTime2Wait" => self.default_time2wait = num(value)?,
            "DefaultTime2Retain" => self.default_time2retain = num(value)?,
            "MaxOutstandingR2T" => self.max_outstanding_r2t = num(value)?,
            "DataPDUInOrder" => self.data_pdu_in_order = parse_bool(key, value)?,
            "DataSequenceInOrder" => self.data_sequence_in_order = parse_bool(key, value)?,
            "ErrorRecoveryLevel" => self.error_recovery_level = num(value)?,
            _ => {}
        }
        Ok(())
    }

    /// FirstBurstLength may not exceed MaxBurstLength (§13.14): clamp after negotiation.
    pub fn finish(&mut self) {
        self.first_burst_length = self.first_burst_length.min(self.max_burst_length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let d = key_def("HeaderDigest").unwrap();
        assert_eq!(respond(d, "None,CRC32C", "CRC32C,None").unwrap(), "None");
        assert_eq!(respond(d, "CRC32C", "None").unwrap(), "Reject");
        let d = key_def("InitialR2T").unwrap();
        assert_eq!(respond(d, "No", "No").unwrap(), "No");
        assert_eq!(respond(d, "No", "Yes").unwrap(), "Yes");
        let d = key_def("ImmediateData").unwrap();
        assert_eq!(respond(d, "Yes", "No").unwrap(), "No");
        let d = key_def("MaxBurstLength").unwrap();
        assert_eq!(respond(d, "1048576", "262144").unwrap(), "262144");
        assert!(respond(d, "12", "262144").is_err());
        let d = key_def("DefaultTime2Wait").unwrap();
        assert_eq!(respond(d, "0", "2").unwrap(), "2");
        assert!(accept(key_def("MaxBurstLength").unwrap(), "65536", "262144").is_err());
        assert_eq!(
            parse_num(key_def("MaxBurstLength").unwrap(), "0x1000").unwrap(),
            4096
        );
        assert!(key_def("X-foo").is_none());
    }
}
