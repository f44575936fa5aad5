//! Secrets out of anything that is recorded or printed: a target URI names its credentials
//! (libiscsi's `USER%SECRET@`), and results are meant to be published.

/// Query keys whose values are secrets (libiscsi's `target_password`, and the like).
const SECRET_KEYS: &[&str] = &["password", "target_password", "secret", "target_secret"];

/// A string fit to record or print: in every `scheme://USER%SECRET@` (libiscsi's form) or
/// `USER:SECRET@` the secret becomes `***`, and so does the value of every secret query key.
/// Results are meant to be published; a CHAP secret must never be in them. Works on a bare
/// URI, on `NAME=URI` and on any command-line argument. An engine whose URIs carry
/// credentials sets its `TargetInfo::uri` through this (the iSCSI initiator does).
pub fn redact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..auth_end];
        match authority.rfind('@') {
            Some(at) => {
                let cred = &authority[..at];
                match cred.find(['%', ':']) {
                    Some(sep) => {
                        out.push_str(&cred[..=sep]);
                        out.push_str("***");
                    }
                    None => out.push_str(cred),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &rest[auth_end..];
        let uri_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (path, query) = match rest[..uri_end].split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (&rest[..uri_end], None),
        };
        out.push_str(path);
        if let Some(q) = query {
            out.push('?');
            let parts: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if SECRET_KEYS.contains(&k.to_ascii_lowercase().as_str()) => {
                        format!("{k}=***")
                    }
                    _ => kv.to_string(),
                })
                .collect();
            out.push_str(&parts.join("&"));
        }
        rest = &rest[uri_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_reach_a_result() {
        let cases = [
            (
                "iscsi://bob%s3cr3t@10.0.0.1:3260/iqn.x:y/1",
                "iscsi://bob%***@10.0.0.1:3260/iqn.x:y/1",
            ),
            (
                "tgt=iscsi://bob%s3cr3t@h/iqn.x/0?target_user=t&target_password=pw&digest=crc32c",
                "tgt=iscsi://bob%***@h/iqn.x/0?target_user=t&target_password=***&digest=crc32c",
            ),
            (
                "iscsi://u:p@[::1]:3260/iqn.x/0",
                "iscsi://u:***@[::1]:3260/iqn.x/0",
            ),
            (
                "iscsi://h/iqn.x/0?Password=x",
                "iscsi://h/iqn.x/0?Password=***",
            ),
            (
                "nbd://127.0.0.1:10809/export",
                "nbd://127.0.0.1:10809/export",
            ),
            ("mem:1G", "mem:1G"),
            ("--bs=4k", "--bs=4k"),
            (
                "a iscsi://x%y@h/i/0 b nbd://h:1/e",
                "a iscsi://x%***@h/i/0 b nbd://h:1/e",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(redact(raw), want, "{raw}");
        }
    }
}
