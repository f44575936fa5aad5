#![no_main]
//! Feeds a hostile target's login responses to the initiator-side state machine: each chunk of
//! the input is a 48-byte header plus a text segment. Nothing may panic, and a login that
//! completes has negotiated values inside what the initiator offered.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::chap::Credentials;
use sanbench_iscsi::wire::login_initiator::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let cfg = InitiatorLoginConfig {
        target_name: (flags & 1 != 0).then(|| "iqn.t".to_string()),
        chap: (flags & 2 != 0).then(|| Credentials::new("u", "secretsecret")),
        header_digest: flags & 4 != 0,
        data_digest: flags & 8 != 0,
        target_chap: (flags & 16 != 0).then(|| Credentials::new("t", "targetsecret")),
        ..Default::default()
    };
    let ours = cfg.max_recv_data_segment_length;
    let mut login = InitiatorLogin::new(cfg);
    let _ = login.start();
    for msg in rest.split(|&b| b == 0xfe) {
        if msg.len() < 48 {
            continue;
        }
        let Ok(Bhs::LoginResponse(resp)) = Bhs::decode(&msg[..48]) else {
            continue;
        };
        match login.on_response(&resp, &msg[48..], &mut |b: &mut [u8]| {
            b.fill(3);
            Ok(())
        }) {
            Ok(InitiatorStep::Send(..)) => {}
            Ok(InitiatorStep::Done(outcome)) => {
                assert_eq!(outcome.params.our_max_recv_data_segment_length, ours);
                break;
            }
            Err(_) => break,
        }
    }
});
