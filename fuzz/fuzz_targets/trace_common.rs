//! The checks every trace parser's fuzz target makes (included by trace_fio.rs,
//! trace_blkparse.rs, trace_blktrace.rs and trace_msr.rs): any bytes give records or one
//! error naming a line (a record, for blktrace), never a panic; every record's length is
//! within 1..=MAX_LEN and its end does not overflow; nothing follows an error; and every
//! offset map places every record inside the span it was fitted to.

use sanbench_trace::map::Mapping;
use sanbench_trace::{records, Format, OffsetMap, Summary, MAX_LEN};

pub fn check(format: Format, data: &[u8]) {
    // A small buffer, so lines cross the reader's refills.
    let r = std::io::BufReader::with_capacity(7, data);
    let mut recs = Vec::new();
    let mut failed = false;
    for x in records(format, r) {
        assert!(!failed, "a record after an error");
        match x {
            Ok(rec) => {
                assert!(rec.len >= 1 && rec.len as u64 <= MAX_LEN);
                assert!(rec.offset.checked_add(rec.len as u64).is_some());
                recs.push(rec);
            }
            Err(e) => {
                assert!(e.line >= 1);
                failed = true;
            }
        }
    }
    let mut s = Summary::default();
    recs.iter().for_each(|r| s.add(r));
    let span = (data.len() as u64 + 1) * 4096;
    for kind in [OffsetMap::None, OffsetMap::Scale, OffsetMap::Modulo] {
        let Ok(m) = Mapping::new(kind, &s, span, 512) else {
            continue;
        };
        for r in &recs {
            assert!(m.apply(r.offset, r.len) + r.len as u64 <= span);
        }
    }
}
