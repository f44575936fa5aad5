//! fio job files as `sanbench run --fio` reads them: any text is parsed and every section
//! mapped or refused without a panic (includes and the environment answered here, as the
//! parser is sans-I/O); a section that maps to a valid workload is written back as a fio job,
//! which must read again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sanbench_fio::{self as fio, FioTarget, Host, ImportOptions, Setup};

struct Fuzz<'a> {
    include: &'a str,
}

impl Host for Fuzz<'_> {
    fn env(&self, name: &str) -> Option<String> {
        name.starts_with('A').then(|| "4k".to_string())
    }
    fn include(&mut self, _from: &str, name: &str) -> Result<(String, String), String> {
        // The second half of the input, so includes (and their nesting) get fuzzed too.
        Ok((name.to_string(), self.include.to_string()))
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let split = text.len() / 2;
    let split = (split..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    let (main, inc) = text.split_at(split);
    let Ok(sections) = fio::parse(main, "fuzz", &mut Fuzz { include: inc }) else {
        return;
    };
    for s in &sections {
        for cli_targets in [None, Some(2)] {
            let o = ImportOptions {
                ignore: vec!["offset".into()],
                cli_targets,
            };
            let Ok(j) = fio::import(s, &o) else { continue };
            if j.workload.validate().is_err() || j.workload.time.is_zero() {
                continue;
            }
            let t = [FioTarget::Path("/dev/null".into())];
            let out = fio::export_section("x", &j.workload, &t, &Setup::default())
                .expect("a path target is always exported");
            let again = fio::parse(&out, "again", &mut Fuzz { include: "" })
                .expect("an exported job parses");
            assert_eq!(again.len(), 1);
        }
    }
});
