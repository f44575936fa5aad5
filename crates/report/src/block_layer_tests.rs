//! The block layer's cost on the fixture comparison, with two of its targets made a block
//! device and its passthrough twin.

use super::*;
use sanbench_store::fixture::sample_comparison;

/// The fixture with target 0 as `/dev/nvme0n1` and target 1 as the passthrough device of
/// `dev`, every cell of target 0 slower by `extra_us` (mean, p50, p99) and dearer by
/// `cpu_us` of CPU per I/O plus the round's index (so the rounds' range is known).
fn paired(dev: &str, extra_us: f64, cpu_us: f64) -> (Comparison, String, String) {
    let mut c = sample_comparison();
    let (b, p) = (c.targets[0].name.clone(), c.targets[1].name.clone());
    let set = |t: &mut TargetEntry, k: &str, v: &str| {
        t.manifest
            .as_mut()
            .unwrap()
            .params
            .insert(k.into(), v.into());
    };
    set(&mut c.targets[0], "path", "/dev/nvme0n1");
    set(&mut c.targets[1], BLOCK_DEVICE, dev);
    // The passthrough side's figures are copied into the block side's, then moved.
    let twin: BTreeMap<(String, u32), sanbench_doc::TargetResult> = c
        .cells
        .iter()
        .filter(|x| x.target == p)
        .map(|x| ((x.workload.clone(), x.repeat), x.result.clone()))
        .collect();
    for cell in c.cells.iter_mut().filter(|x| x.target == b) {
        let mut r = twin[&(cell.workload.clone(), cell.repeat)].clone();
        r.latency_us.mean += extra_us;
        r.latency_us.p50 += extra_us;
        r.latency_us.p99 += 2.0 * extra_us;
        r.iops *= 0.8;
        r.efficiency.cpu_us_per_io = Some(10.0 + cpu_us + cell.repeat as f64);
        cell.result = r;
    }
    for cell in c.cells.iter_mut().filter(|x| x.target == p) {
        cell.result.efficiency.cpu_us_per_io = Some(10.0);
    }
    (c, b, p)
}

#[test]
fn a_block_device_beside_its_passthrough_twin_gets_the_difference_per_workload() {
    let (c, b, p) = paired("/dev/nvme0n1", 4.0, 1.5);
    let costs = costs(&c);
    assert_eq!(costs.len(), c.workloads.len(), "{costs:#?}");
    for k in &costs {
        assert_eq!(
            (k.block.as_str(), k.passthrough.as_str()),
            (b.as_str(), p.as_str())
        );
        assert_eq!(k.device, "/dev/nvme0n1");
        assert_eq!(k.rounds, 3);
        assert!((k.latency_mean_us.median - 4.0).abs() < 1e-9, "{k:?}");
        assert!((k.latency_p50_us.median - 4.0).abs() < 1e-9, "{k:?}");
        assert!((k.latency_p99_us.median - 8.0).abs() < 1e-9, "{k:?}");
        assert!((k.iops_ratio.median - 0.8).abs() < 1e-9, "{k:?}");
        let cpu = k.cpu_us_per_io.unwrap();
        assert_eq!((cpu.min, cpu.median, cpu.max), (1.5, 2.5, 3.5));
    }
    let text = lines(&costs);
    assert!(
        text[0].contains("latency +4.0 µs mean")
            && text[0].contains("CPU +2.5 µs (+1.5 to +3.5) per I/O"),
        "{text:#?}"
    );
}

#[test]
fn no_pair_when_the_passthrough_device_is_another_disk_or_nothing_names_one() {
    let (c, _, _) = paired("/dev/nvme1n1", 4.0, 1.5);
    assert!(costs(&c).is_empty());
    assert!(costs(&sample_comparison()).is_empty());
}

#[test]
fn a_missing_cpu_figure_on_one_round_leaves_cpu_out_rather_than_a_partial_median() {
    let (mut c, b, _) = paired("/dev/nvme0n1", 4.0, 1.5);
    let cell = c.cells.iter_mut().find(|x| x.target == b).unwrap();
    let w = cell.workload.clone();
    cell.result.efficiency.cpu_us_per_io = None;
    let costs = costs(&c);
    let k = costs.iter().find(|k| k.workload == w).unwrap();
    assert!(k.cpu_us_per_io.is_none());
    assert!(costs
        .iter()
        .filter(|k| k.workload != w)
        .all(|k| k.cpu_us_per_io.is_some()));
}

#[test]
fn the_report_shows_it_in_every_format_and_only_where_there_is_a_pair() {
    let (c, b, _) = paired("/dev/nvme0n1", 4.0, 1.5);
    let r = crate::Report::new(&c, &crate::Options::default());
    assert_eq!(r.block_layer.len(), c.workloads.len());
    let render = |name: &str, r: &crate::Report| {
        let e = crate::exporters()
            .into_iter()
            .find(|e| e.file_name() == name)
            .unwrap();
        String::from_utf8(e.render(r).unwrap()).unwrap()
    };
    let md = render("report.md", &r);
    assert!(md.contains("## What the block layer cost"), "{md}");
    assert!(md.contains(&format!("/ {}", c.targets[1].name)) && md.contains(&b));
    assert!(render("report.html", &r).contains("id=\"block-layer\""));
    let json: serde_json::Value = serde_json::from_str(&render("results.json", &r)).unwrap();
    assert_eq!(
        json["block_layer"].as_array().unwrap().len(),
        c.workloads.len()
    );
    assert_eq!(json["block_layer"][0]["latency_mean_us"]["median"], 4.0);

    let plain = sample_comparison();
    let r = crate::Report::new(&plain, &crate::Options::default());
    assert!(!render("report.md", &r).contains("block layer"));
    let json: serde_json::Value = serde_json::from_str(&render("results.json", &r)).unwrap();
    assert!(json.get("block_layer").is_none());
}
