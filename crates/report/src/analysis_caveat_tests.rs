//! The caveats a report carries before its figures: reads over never-written space, CPU
//! counted from busy ticks, verification's bad blocks, other processes beside the cells.

use super::*;

#[test]
fn reads_over_holes_are_a_caveat() {
    let mut cmp = sample_comparison();
    assert!(caveats(&cmp).is_empty());
    for c in cmp.cells.iter_mut().filter(|c| c.target == "FC 8G") {
        c.result.read.ios = 10;
        c.result.precondition = Some(sanbench_doc::precondition::Report {
            state: sanbench_doc::precondition::SpanState::Holes,
            note: "not preconditioned: SEEK_DATA reports 1GiB of 2GiB unwritten".into(),
            ..Default::default()
        });
    }
    let cav = caveats(&cmp);
    assert_eq!(cav.len(), 1, "{cav:?}");
    assert!(
        cav[0].starts_with("FC 8G: not preconditioned"),
        "{}",
        cav[0]
    );
}

/// Cells whose CPU breakdown has no `tick_busy_pct` were measured from busy ticks (before
/// stop 36): said once, with how many.
#[test]
fn cpu_counted_from_busy_ticks_is_a_caveat() {
    let mut cmp = sample_comparison();
    let with = |now: bool| sanbench_store::fixture::cpu_block(!now);
    for c in cmp.cells.iter_mut() {
        c.result.cpu = with(true);
    }
    assert!(caveats(&cmp).is_empty());
    let n = cmp.cells.len();
    for c in cmp.cells.iter_mut().take(3) {
        c.result.cpu = with(false);
    }
    let cav = caveats(&cmp);
    assert_eq!(cav.len(), 1, "{cav:?}");
    assert!(
        cav[0].starts_with(&format!(
            "3 of {n} cells were measured by an earlier sanbench"
        )),
        "{}",
        cav[0]
    );
}

#[test]
fn verification_is_a_section_and_bad_data_a_caveat() {
    use sanbench_doc::verify::{BadBlock, Class, VerifyReport};
    let mut cmp = sample_comparison();
    let md = |cmp: &Comparison| {
        let r = crate::Report::new(cmp, &crate::Options::default());
        use crate::export::Exporter;
        let out = crate::export::MarkdownExporter.render(&r).unwrap();
        (String::from_utf8(out).unwrap(), r.caveats.clone())
    };
    assert!(!md(&cmp).0.contains("Data verification"));
    for c in cmp.cells.iter_mut() {
        let mut v = VerifyReport {
            unit: 512,
            reads: 10,
            bytes: 40960,
            units: 80,
            ..VerifyReport::default()
        };
        if c.target == "FC 8G" && c.repeat == 0 {
            v.record(BadBlock {
                offset: 0x3000,
                class: Class::Torn,
                expected: None,
                found: None,
                excerpt: "53424b32".into(),
                io_offset: 0x3000,
                io_len: 4096,
                inline: true,
            });
        }
        c.result.verify = Some(v);
    }
    let (text, cav) = md(&cmp);
    assert!(text.contains("## Data verification"), "{text}");
    assert!(text.contains("`0x3000` torn"), "{text}");
    assert!(text.contains("| none |"), "{text}");
    assert_eq!(cav.len(), 1, "{cav:?}");
    assert!(
        cav[0].starts_with("FC 8G returned data that did not verify (")
            && cav[0].contains(" torn)"),
        "{}",
        cav[0]
    );
}

/// Cells that ran beside other processes (the monitor's `cpu.others`) are a caveat naming
/// them; a few per cent of a core is not.
#[test]
fn other_processes_beside_cells_are_a_caveat() {
    use sanbench_doc::host::{OtherProcesses, Others};
    let mut c = sample_comparison();
    let n = c.cells.len();
    let others = |pct: f64, who: &str, s: f64| Others {
        cpu_s: s,
        pct_of_core: pct,
        top: vec![OtherProcesses {
            name: who.into(),
            processes: 3,
            cpu_s: s,
        }],
    };
    let set = |c: &mut Comparison, i: usize, v: Others| {
        let cpu = c.cells[i].result.cpu.get_or_insert_with(Default::default);
        cpu.others = Some(v);
    };
    for i in 0..n {
        set(&mut c, i, others(2.0, "sshd", 0.1));
    }
    let mention = |c: &Comparison| {
        caveats(c)
            .into_iter()
            .find(|t| t.contains("other processes"))
    };
    assert_eq!(mention(&c), None);
    set(&mut c, 0, others(40.0, "cargo", 2.0));
    set(&mut c, 5, others(12.0, "rustc", 0.5));
    set(&mut c, 6, others(35.0, "cargo", 1.5));
    let text = mention(&c).expect("a caveat");
    assert!(
        text.starts_with(&format!("3 of {n} cells ran beside other processes using at least 10 % of a core (up to 40 %; in those cells: cargo 3.5 s (3 processes), rustc 0.5 s (3 processes))")),
        "{text}"
    );
    assert!(text.contains("--watch"), "{text}");
}
