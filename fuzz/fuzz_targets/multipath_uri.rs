//! Multi-portal URIs (`iscsi://H1,H2/IQN/LUN?policy=...`) as the multipath module splits
//! them: any text is taken or refused without a panic; what is taken names each portal once,
//! keeps the scheme and the path on every portal's URI, and leaves no multipath key in them;
//! a refusal is one line that does not show the secret.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_engine::multipath::uri::parse;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse(&text) {
        Ok(None) => {}
        Ok(Some(m)) => {
            let scheme = text.split_once("://").map(|(s, _)| s).unwrap_or_default();
            assert!(!m.paths.is_empty());
            for p in &m.paths {
                let rest = p.strip_prefix(&format!("{scheme}://")).expect("the scheme kept");
                let query = rest.split_once('?').map(|(_, q)| q).unwrap_or_default();
                for k in ["policy=", "failback=", "path_timeout=", "no_path_retry="] {
                    assert!(!query.split('&').any(|kv| kv.starts_with(k)), "{p}");
                }
            }
            let mut seen = m.paths.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), m.paths.len(), "a portal twice: {:?}", m.paths);
        }
        Err(e) => assert!(!e.contains('\n') || text.contains('\n'), "{e}"),
    }
});
