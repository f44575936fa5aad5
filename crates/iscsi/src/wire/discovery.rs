//! SendTargets discovery (RFC 7143 §12.3 and Appendix C): the text a target answers to
//! `SendTargets=All` (or `=<iqn>`, or empty in a normal session).

use super::text::Pair;

/// One target to advertise and the portals (`ip:port,tpgt`) it is reachable at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRecord {
    pub name: String,
    pub addresses: Vec<String>,
}

/// Builds the response pairs for a SendTargets request value. `All` lists every target (only
/// allowed in discovery sessions: `discovery` must be true), a name lists that target, and an
/// empty value lists the session's own target (`current`).
pub fn send_targets(
    request: &str,
    targets: &[TargetRecord],
    discovery: bool,
    current: Option<&str>,
) -> Vec<Pair> {
    let selected: Vec<&TargetRecord> = match request {
        "All" if discovery => targets.iter().collect(),
        "All" => Vec::new(),
        "" => targets
            .iter()
            .filter(|t| Some(t.name.as_str()) == current)
            .collect(),
        name => targets.iter().filter(|t| t.name == name).collect(),
    };
    let mut out = Vec::new();
    for t in selected {
        out.push(Pair::new("TargetName", t.name.clone()));
        for a in &t.addresses {
            out.push(Pair::new("TargetAddress", a.clone()));
        }
    }
    out
}

/// Parses a SendTargets response (initiator side): target names with their addresses.
/// Unlike login text, `TargetName` and `TargetAddress` repeat, so this reads raw text.
pub fn parse_send_targets(data: &[u8]) -> Vec<TargetRecord> {
    let mut out: Vec<TargetRecord> = Vec::new();
    for item in data.split(|&b| b == 0) {
        let Ok(s) = std::str::from_utf8(item) else {
            continue;
        };
        if let Some(n) = s.strip_prefix("TargetName=") {
            out.push(TargetRecord {
                name: n.to_string(),
                addresses: Vec::new(),
            });
        } else if let Some(a) = s.strip_prefix("TargetAddress=") {
            if let Some(t) = out.last_mut() {
                t.addresses.push(a.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::text::encode_vec;

    #[test]
    fn all_and_named() {
        let t = vec![TargetRecord {
            name: "iqn.a".into(),
            addresses: vec!["127.0.0.1:3260,1".into()],
        }];
        let p = send_targets("All", &t, true, None);
        assert_eq!(p.len(), 2);
        assert!(send_targets("All", &t, false, Some("iqn.a")).is_empty());
        assert_eq!(send_targets("", &t, false, Some("iqn.a")).len(), 2);
        assert_eq!(parse_send_targets(&encode_vec(&p)), t);
    }
}
