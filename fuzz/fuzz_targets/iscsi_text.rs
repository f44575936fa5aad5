#![no_main]
//! Decodes key=value text and SendTargets answers; decoded pairs must re-encode losslessly.
use libfuzzer_sys::fuzz_target;
use sanbench_iscsi::wire::{discovery, keys, text};

fuzz_target!(|data: &[u8]| {
    if let Ok(pairs) = text::decode(data) {
        assert_eq!(text::decode(&text::encode_vec(&pairs)).as_ref(), Ok(&pairs));
        let mut p = keys::SessionParams::default();
        for pair in &pairs {
            let _ = p.apply(&pair.key, &pair.value);
            if let Some(def) = keys::key_def(&pair.key) {
                let _ = keys::respond(def, &pair.value, &pair.value);
                let _ = keys::accept(def, &pair.value, &pair.value);
            }
        }
    }
    let _ = discovery::parse_send_targets(data);
});
