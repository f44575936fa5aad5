//! How a finding's average is worded when it does not lead: judged against 1 and the margin as
//! a test is, so that it never reads as a win inside what the report calls equivalent, nor
//! as "no difference" where the data are inconclusive.

use super::*;

/// Two runs whose decided tests agree but whose category average sits either side of 1, inside
/// the noise: both say the same thing in the same order (stop 29's demo read "NBD 1.1x
/// [0.88-1.4] greater" once and "NVMe-TCP 1.04x [0.78-1.4] greater" the next time).
#[test]
fn an_undecided_average_never_leads_the_sentence() {
    let run = |noisy_a: &'static [f64]| {
        doc(
            &["A", "B"],
            &[
                ("w1", "bandwidth"),
                ("w2", "bandwidth"),
                ("w3", "bandwidth"),
            ],
            &[
                ("w1", "A", &[400.0, 410.0, 390.0, 405.0]),
                ("w1", "B", &[100.0, 101.0, 99.0, 100.0]),
                ("w2", "A", &[100.0, 101.0, 99.0, 100.0]),
                ("w2", "B", &[300.0, 310.0, 290.0, 305.0]),
                ("w3", "A", noisy_a),
                ("w3", "B", &[100.0, 180.0, 60.0, 140.0]),
            ],
        )
    };
    let mut texts = Vec::new();
    for noisy_a in [
        &[140.0, 60.0, 170.0, 62.0][..],
        &[40.0, 110.0, 60.0, 78.0][..],
    ] {
        let cmp = run(noisy_a);
        let an = Analysis::new(&cmp);
        let fs = findings(&cmp, &an, 0.10);
        let bw: Vec<&Finding> = fs.iter().filter(|f| f.label == "bandwidth").collect();
        assert_eq!(bw.len(), 2, "{bw:#?}");
        for f in &bw {
            assert!(
                f.ci_low.unwrap() < 1.0 && f.ci_high.unwrap() > 1.0,
                "{f:#?}"
            );
            assert!(f.text.ends_with(", inconclusive"), "{}", f.text);
        }
        // The larger win first, whichever side the average leans to.
        assert!(
            bw[0]
                .text
                .starts_with("A shows greater bandwidth than B on 1 of 3 tests (maximum 4.0x in test w1), B on 1 (maximum 3.0x in test w2); over all 3: "),
            "{}",
            bw[0].text
        );
        assert!(
            bw[1].text.starts_with(
                "B shows greater bandwidth than A on 1 of 3 tests (maximum 3.0x in test w2), A on 1 (maximum 4.0x in test w1); over all 3: "
            ),
            "{}",
            bw[1].text
        );
        texts.push(bw[0].average > 1.0);
    }
    // The averages did lean different ways: the sentences' agreement is not an accident.
    assert_eq!(texts, [true, false]);
}

/// An average above 1 but inside the margin (stop 35's demo: iSCSI over NBD bandwidth 1.07x
/// [1.03-1.10] led its sentence as a win, with ±10 % called equivalent in the next line)
/// follows the tests won and says it is smaller than the margin.
#[test]
fn an_average_inside_the_margin_follows_the_tests_won() {
    let mut values: Vec<(&str, &str, &[f64])> = vec![("w1", "A", &[130.0]), ("w1", "B", &[100.0])];
    let ws = ["w2", "w3", "w4", "w5"];
    for w in ws {
        values.push((w, "A", &[101.0]));
        values.push((w, "B", &[100.0]));
    }
    let mut workloads = vec![("w1", "bandwidth")];
    workloads.extend(ws.iter().map(|w| (*w, "bandwidth")));
    let cmp = doc(&["A", "B"], &workloads, &values);
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let f = find(&fs, "bandwidth", "A").unwrap_or_else(|| panic!("{fs:#?}"));
    // (1.3 × 1.01⁴)^(1/5), counted from a million I/Os a cell: the interval is narrow, above
    // 1 and below 1.1.
    assert!((f.average - 1.0616).abs() < 1e-3, "{}", f.average);
    assert!(
        f.ci_low.unwrap() > 1.0 && f.ci_high.unwrap() < 1.1,
        "{f:#?}"
    );
    assert!(
        f.text.starts_with(
            "A shows greater bandwidth than B on 1 of 5 tests (maximum 1.3x in test w1); over all 5: 1.06x ["
        ),
        "{}",
        f.text
    );
    assert!(
        f.text.ends_with("], greater by less than 10 %"),
        "{}",
        f.text
    );
    // The same data with a 5 % margin: the average is beyond it and leads.
    let fs = findings(&cmp, &an, 0.05);
    let f = find(&fs, "bandwidth", "A").unwrap();
    assert!(f.text.starts_with("A shows 1.06x ["), "{}", f.text);
    assert!(
        f.text
            .ends_with("] greater bandwidth than B (1 of 5 tests; maximum 1.3x in test w1)"),
        "{}",
        f.text
    );
}

/// An average beyond the margin leads; one that is not comes after any that is, whatever
/// their sizes: an order the margin, not the noise, decides.
#[test]
fn averages_beyond_the_margin_come_first() {
    let cmp = doc(
        &["A", "B", "C"],
        &[("w1", "bandwidth"), ("w2", "bandwidth")],
        &[
            // A over C: 2.0x on w1 and 1.01x on w2, an average of 1.42x beyond the margin.
            ("w1", "A", &[200.0]),
            ("w2", "A", &[101.0]),
            ("w1", "C", &[100.0]),
            ("w2", "C", &[100.0]),
            // B over C: 3.0x on w1 and 0.36x on w2, an average of 1.04x with a narrow
            // interval: a larger win, an average inside the margin.
            ("w1", "B", &[300.0]),
            ("w2", "B", &[36.0]),
        ],
    );
    let an = Analysis::new(&cmp);
    let fs = findings(&cmp, &an, 0.10);
    let bw: Vec<&Finding> = fs
        .iter()
        .filter(|f| f.label == "bandwidth" && f.kind == "better" && f.worse == "C")
        .collect();
    assert_eq!(bw.len(), 2, "{bw:#?}");
    assert_eq!(bw[0].better, "A", "{bw:#?}");
    assert!(bw[0].text.starts_with("A shows 1.4x ["), "{}", bw[0].text);
    assert!(
        bw[1].text.ends_with("], greater by less than 10 %"),
        "{}",
        bw[1].text
    );
}
