#![no_main]
//! Feeds a hostile login conversation to the target-side state machine: each chunk of the
//! input is a 48-byte header plus a text segment. Nothing may panic.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::chap::Credentials;
use sanbench_iscsi::wire::login::{TargetLogin, TargetLoginConfig};

fuzz_target!(|data: &[u8]| {
    let chap = data.first().is_some_and(|b| b & 1 != 0);
    let cfg = TargetLoginConfig {
        target_names: vec!["iqn.t".into()],
        chap: chap.then(|| Credentials::new("u", "secretsecret")),
        ..Default::default()
    };
    let mut t = TargetLogin::new(cfg, 1, 1);
    let mut rnd = |b: &mut [u8]| {
        b.fill(7);
        Ok(())
    };
    for msg in data.get(1..).unwrap_or(&[]).split(|&b| b == 0xfe) {
        if msg.len() < 48 {
            continue;
        }
        if let Ok(Bhs::LoginRequest(req)) = Bhs::decode(&msg[..48]) {
            let r = t.on_request(&req, &msg[48..], &mut rnd);
            if r.is_failure() {
                break;
            }
        }
    }
});
