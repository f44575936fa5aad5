//! Job files modeled on fio's own examples (examples/*.fio in fio's source: written anew here,
//! not copied), what they map to, what they are refused for, and the round trip
//! workload -> fio job -> workload.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use sanbench_doc::spec::{Arrival, Segment, Workload};

struct Env(HashMap<String, String>);

impl Host for Env {
    fn env(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn include(&mut self, _: &str, name: &str) -> Result<(String, String), String> {
        Err(format!("{name}: not here"))
    }
}

fn jobs(text: &str) -> Vec<Section> {
    let env = Env([("uri".to_string(), "nbd://127.0.0.1:10809".to_string())].into());
    parse(text, "t.fio", &mut { env }).unwrap()
}

fn one(text: &str, ignore: &[&str]) -> Result<Imported, Vec<String>> {
    let o = ImportOptions {
        ignore: ignore.iter().map(|s| s.to_string()).collect(),
        cli_targets: None,
    };
    import(&jobs(text)[0], &o)
}

fn seg(bs: u64, read: f64, random: f64) -> Segment {
    Segment {
        weight: 1,
        read_bs: bs,
        write_bs: bs,
        read_pct: read,
        random_pct: random,
        align: None,
        trim_pct: 0.0,
        write_zeroes_pct: 0.0,
    }
}

/// Like fio's fio-rand-RW.fio: a mixed random job, its globals in [global].
const RAND_RW: &str = "; mixed random\n[global]\nname=rand-rw\nfilename=/dev/shm/rw.img\n\
    rw=randrw\nrwmixread=60\nrwmixwrite=40\nbs=4K\ndirect=0\nnumjobs=4\ntime_based\n\
    runtime=900\n\n[file1]\nsize=10G\nioengine=libaio\niodepth=16\n";

#[test]
fn a_mixed_random_job() {
    let j = one(RAND_RW, &[]).unwrap();
    assert_eq!(j.name, "file1");
    let w = &j.workload;
    assert_eq!(w.segments, vec![seg(4096, 60.0, 100.0)]);
    assert_eq!((w.qd, w.workers), (16, 4));
    assert_eq!(w.time, Duration::from_secs(900));
    assert_eq!(w.span, Some(10 << 30));
    assert_eq!(j.targets, vec!["/dev/shm/rw.img"]);
    assert_eq!(j.setup.engine.as_deref(), Some("io_uring"));
    assert_eq!(j.setup.direct, Some(false));
    assert!(j.notes[0].contains("libaio"), "{:?}", j.notes);
}

/// Like fio's iometer-file-access-server.fio: Iometer's file-server sizes.
const FILE_SERVER: &str = "[iometer]\nbssplit=512/10:1k/5:2k/5:4k/60:8k/2:16k/4:32k/4:64k/10\n\
    rw=randrw\nrwmixread=80\ndirect=1\nsize=4g\nioengine=libaio\niodepth=64\n\
    filename=/dev/shm/fs.img\ntime_based=1\nruntime=30s\n";

#[test]
fn iometer_file_server_sizes_become_weighted_segments() {
    let j = one(FILE_SERVER, &[]).unwrap();
    let w = &j.workload;
    let got: Vec<(u64, u32)> = w.segments.iter().map(|s| (s.read_bs, s.weight)).collect();
    assert_eq!(
        got,
        vec![
            (512, 10),
            (1024, 5),
            (2048, 5),
            (4096, 60),
            (8192, 2),
            (16384, 4),
            (32768, 4),
            (65536, 10)
        ]
    );
    assert!(w
        .segments
        .iter()
        .all(|s| s.read_pct == 80.0 && s.random_pct == 100.0 && s.align == Some(512)));
    assert_eq!(j.setup.direct, Some(true));
    assert_eq!(w.qd, 64);
}

/// Like fio's ssd-test.fio: four stonewalled jobs under one [global].
const SSD: &str = "[global]\nbs=4k\nioengine=libaio\niodepth=4\nsize=1g\ndirect=1\n\
    runtime=60\ntime_based\ndirectory=/mnt/ssd\nfilename=ssd.test.file\n\
    [seq-read]\nrw=read\nstonewall\n[rand-read]\nrw=randread\nstonewall\n\
    [seq-write]\nrw=write\nstonewall\n[rand-write]\nrw=randwrite\nstonewall\n";

#[test]
fn one_workload_per_section() {
    let all = jobs(SSD);
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["seq-read", "rand-read", "seq-write", "rand-write"]);
    // directory= is refused unless the command line names the targets.
    let e = import(&all[0], &ImportOptions::default()).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e[0].contains("t.fio:9: [seq-read] directory=/mnt/ssd:"),
        "{e:?}"
    );
    let o = ImportOptions {
        cli_targets: Some(1),
        ..Default::default()
    };
    let mixes: Vec<(f64, f64)> = all
        .iter()
        .map(|s| {
            let sg = &import(s, &o).unwrap().workload.segments[0];
            (sg.read_pct, sg.random_pct)
        })
        .collect();
    assert_eq!(
        mixes,
        [(100.0, 0.0), (100.0, 100.0), (0.0, 0.0), (0.0, 100.0)]
    );
}

/// Like fio's poisson-rate-submission.fio.
const POISSON: &str = "[poisson]\nsize=128m\nrw=randread\nioengine=libaio\niodepth=32\n\
    direct=1\nio_submit_mode=offload\nrate_iops=50\nrate_process=poisson\n\
    filename=/dev/shm/p.img\ntime_based\nruntime=10\nnumjobs=2\n";

#[test]
fn rates_and_refusals() {
    let e = one(POISSON, &[]).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("t.fio:7: [poisson] io_submit_mode=offload: "));
    assert!(e[0].ends_with("(--fio-ignore io_submit_mode runs without it)"));
    let j = one(POISSON, &["io_submit_mode"]).unwrap();
    // fio paces each of its 2 jobs at 50: sanbench's rate is the target's, over its workers.
    assert_eq!(j.workload.rate, Some(100.0));
    assert_eq!(j.workload.arrival, Arrival::Poisson);
}

/// `cpus_allowed` and `cpus_allowed_policy`: the list as written (the CLI checks it) and the
/// split policy; any other policy is one line.
#[test]
fn cpus_allowed_and_its_policy() {
    let job =
        |extra: &str| format!("[j]\nfilename=/dev/shm/x\nsize=1m\nrw=randread\nnumjobs=2\n{extra}");
    let j = one(&job("cpus_allowed=0-1\ncpus_allowed_policy=split\n"), &[]).unwrap();
    assert_eq!(
        (j.setup.cpus.as_deref(), j.setup.cpus_split),
        (Some("0-1"), true)
    );
    let j = one(&job("cpus_allowed=1\ncpus_allowed_policy=shared\n"), &[]).unwrap();
    assert_eq!(
        (j.setup.cpus.as_deref(), j.setup.cpus_split),
        (Some("1"), false)
    );
    let j = one(&job(""), &[]).unwrap();
    assert_eq!((j.setup.cpus.as_deref(), j.setup.cpus_split), (None, false));
    let e = one(&job("cpus_allowed_policy=spread\n"), &[]).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("cpus_allowed_policy=spread: 'spread' is not a policy"),
        "{e:?}"
    );
}

/// `iomem_align` (and fio's `mem_align`): sanbench's page-aligned buffers satisfy any alignment
/// that divides a page; a coarser one is one line. The export always asks fio for a page, as
/// sanbench's slots are placed.
#[test]
fn buffer_alignment_in_and_out() {
    let job = |extra: &str| format!("[j]\nfilename=/dev/shm/x\nsize=1m\nrw=write\n{extra}");
    for ok in ["iomem_align=4k\n", "mem_align=512\n", "iomem_align=0\n"] {
        one(&job(ok), &[]).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
    }
    let e = one(&job("iomem_align=64k\n"), &[]).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("iomem_align=64k: sanbench aligns its buffers to 4096 bytes, not 65536"),
        "{e:?}"
    );
    let w = Workload::from_toml("[[segment]]\nbs = \"64k\"\nread = 0\nrandom = 0\n").unwrap();
    let t = [FioTarget::Path("/x".into())];
    let text = export_section("w", &w, &t, &Setup::default()).unwrap();
    assert!(text.contains("\niomem_align=4k\n"), "{text}");
    let t = [FioTarget::Nbd("nbd://127.0.0.1:1/x".into())];
    let text = export_section("w", &w, &t, &Setup::default()).unwrap();
    assert!(text.contains("\niomem_align=4k\n"), "{text}");
}

/// The export runs fio's jobs as threads of one process, as sanbench's streams are (fio's
/// default forks each job into a session of its own: docs/FIO.md); `thread` reads back as
/// changing nothing.
#[test]
fn jobs_run_as_threads() {
    let w = Workload::from_toml("workers = 2\n[[segment]]\nbs = \"4k\"\nread = 70\n").unwrap();
    let t = [FioTarget::Path("/x".into())];
    let text = export_section("w", &w, &t, &Setup::default()).unwrap();
    assert!(text.contains("\nnumjobs=2\n"), "{text}");
    assert!(text.contains("\nthread=1\n"), "{text}");
    let back = one(&text, &[]).unwrap();
    assert_eq!(back.workload.workers, 2);
}

/// Like fio's nbd.fio: the URI from the environment, jobs at offsets.
const NBD: &str = "[global]\nioengine=nbd\nuri=${uri}\nrw=randrw\ntime_based\nruntime=60\n\
    group_reporting\niodepth=64\n[job0]\noffset=0\n[job1]\noffset=64m\n";

#[test]
fn nbd_uri_and_offsets() {
    let all = jobs(NBD);
    let j = import(&all[0], &ImportOptions::default()).unwrap();
    assert_eq!(j.targets, vec!["nbd://127.0.0.1:10809"]);
    assert_eq!(j.workload.segments[0].read_pct, 50.0);
    let e = import(&all[1], &ImportOptions::default()).unwrap_err();
    assert!(e[0].contains("offset=64m: sanbench uses each target from offset 0"));
    // Unset variables are an error only where their value is used.
    let unset = "[a]\nioengine=nbd\nuri=${NOPE}\ntime_based\nruntime=1\n";
    let e = one(unset, &[]).unwrap_err();
    assert!(
        e[0].contains("the environment variable NOPE is not set"),
        "{e:?}"
    );
    let o = ImportOptions {
        cli_targets: Some(1),
        ..Default::default()
    };
    assert!(import(&jobs(unset)[0], &o).is_ok());
}

#[test]
fn libiscsi_null_verify_and_flushes() {
    // Like fio's libiscsi.fio: colons escaped in the URI.
    let j = one(
        "[iscsi]\nioengine=libiscsi\nfilename=iscsi\\://127.0.0.1/iqn.2016-02.com.fio\\:system\\:fio/1\n\
         time_based\nruntime=5\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        j.targets,
        vec!["iscsi://127.0.0.1/iqn.2016-02.com.fio:system:fio/1"]
    );
    // Like fio's null.fio (gtod_reduce refused).
    let null = "[global]\nbs=4k\ngtod_reduce=1\n[null]\nioengine=null\nsize=100g\nrw=randread\n\
                norandommap\ntime_based\nruntime=2\n";
    let e = one(null, &[]).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("[null] gtod_reduce=1: sanbench has no such option"));
    // A replay of a trace: not a workload; the message says where sanbench replays.
    let e = one("[r]\nread_iolog=app.iolog\nfilename=/dev/shm/r\n", &[]).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("read_iolog=app.iolog: a trace replay is not an access specification"));
    assert!(e[0].contains("sanbench replay TRACE TARGET"), "{e:?}");
    let j = one(null, &["gtod_reduce"]).unwrap();
    assert_eq!(j.targets, vec![format!("null:{}", 100u64 << 30)]);
    assert_eq!(j.workload.span, None);
    // Like fio's basic-verify.fio, with flushes.
    let j = one(
        "[wv]\nrw=randwrite\nbs=4k\ndirect=1\nioengine=io_uring\niodepth=16\nverify=crc32c\n\
         fdatasync=8\nfilename=/dev/shm/v\ntime_based\nruntime=1\nbuffer_compress_percentage=50\n\
         dedupe_percentage=20\ninvalidate=0\n",
        &[],
    )
    .unwrap();
    assert!(j.setup.verify && j.setup.keep_cache);
    assert_eq!((j.setup.compress, j.setup.dedupe), (50.0, 20.0));
    assert_eq!(j.workload.flush_every, 8);
}

#[test]
fn every_unmapped_option_is_one_line() {
    let text = "[a]\nrw=randread:8\nthinktime=10\nnrfiles=2\nfilename=/x\nruntime=3\n\
                rate_iops=100\nrw2=1\n";
    let e = one(text, &[]).unwrap_err();
    let keys: Vec<&str> = e
        .iter()
        .map(|l| {
            l.split("] ")
                .nth(1)
                .unwrap()
                .split([':', '='])
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        keys,
        ["thinktime", "nrfiles", "rw2", "rw", "time_based"],
        "{e:?}"
    );
    assert!(e.iter().all(|l| !l.contains('\n')));
    // Sequential several sizes, mixed rates, psync's depth.
    let e = one(
        "[b]\nrw=rw\nbssplit=4k/50:8k/50\nrate_iops=5\nfilename=/x\ntime_based\nruntime=1\n",
        &[],
    )
    .unwrap_err();
    assert!(e[0].contains("bssplit=4k/50:8k/50: several sizes with sequential I/O"));
    assert!(e[1].contains("rate_iops=5: fio paces reads and writes apart"));
    let j = one(
        "[c]\nioengine=psync\niodepth=8\nfilename=/x\ntime_based\nruntime=1\n",
        &[],
    )
    .unwrap();
    assert_eq!(j.workload.qd, 1);
    assert!(j.notes[0].contains("one I/O in flight"));
}

#[test]
fn sizes_per_direction_and_ranges() {
    let j = one(
        "[a]\nrw=randrw\nrwmixwrite=30\nbs=4k,64k\nfilename=/x:/y\niodepth=8\nsize=2m\n\
         ioengine=io_uring\ntime_based\nruntime=1\n",
        &[],
    )
    .unwrap();
    let s = &j.workload.segments[0];
    assert_eq!((s.read_bs, s.write_bs, s.read_pct), (4096, 65536, 70.0));
    // Two files: fio's depth and size are the job's, sanbench's per target.
    assert_eq!((j.workload.qd, j.workload.span), (4, Some(1 << 20)));
    let j = one(
        "[a]\nrw=randread\nbsrange=4k-16k\nfilename=/x\ntime_based\nruntime=1\n",
        &[],
    )
    .unwrap();
    assert_eq!(j.workload.segments.len(), 4);
    assert_eq!(j.workload.segments[3].read_bs, 16384);
}

fn arb_workload() -> impl Strategy<Value = (Workload, Vec<FioTarget>, Setup)> {
    let sizes = prop::sample::select(vec![512u64, 4096, 8192, 65536, 1 << 20]);
    (
        prop_oneof![Just(0u64), Just(100), 1u64..100],
        prop_oneof![Just(0u64), Just(100), 1u64..100],
        (sizes.clone(), sizes),
        // Whole percentages adding up to 100 (bssplit's), at distinct sizes.
        (
            prop::collection::btree_set(1u64..100, 1..4),
            prop::sample::subsequence(vec![512u64, 1024, 4096, 16384, 131072], 4),
        ),
        any::<bool>(),
        (1u32..64, 1u32..8, 0u64..5000, 1u64..100_000),
        (
            prop::option::of(1u64..64),
            0u32..100,
            prop::option::of(1u64..1000),
            any::<bool>(),
        ),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (0u64..100, 0u64..100, 1usize..3),
    )
        .prop_map(
            |(
                read,
                random,
                (rbs, wbs),
                split,
                multi,
                load,
                (span, flush, rate, poisson),
                st,
                dd,
            )| {
                let (qd, workers, ramp_ms, time_ms) = load;
                let (sync, direct, keep, verify) = st;
                let (compress, dedupe, n) = dd;
                let multi = multi && random == 100;
                let read_pct = read as f64;
                // The direction a segment never issues has the other's size (the subset).
                let (rbs, wbs) = match read {
                    0 => (wbs, wbs),
                    100 => (rbs, rbs),
                    _ => (rbs, wbs),
                };
                let segments = if multi {
                    let (cuts, bss) = split;
                    let mut edges: Vec<u64> = cuts.into_iter().collect();
                    edges.push(100);
                    let mut prev = 0;
                    let parts: Vec<(u64, u64)> = edges
                        .iter()
                        .zip(bss)
                        .map(|(&e, b)| {
                            let p = (b, e - prev);
                            prev = e;
                            p
                        })
                        .collect();
                    let d = sizes::normalize(parts);
                    let min = d[0].0;
                    d.iter()
                        .map(|&(b, wt)| Segment {
                            weight: wt as u32,
                            read_bs: b,
                            write_bs: b,
                            read_pct,
                            random_pct: 100.0,
                            align: Some(min),
                            trim_pct: 0.0,
                            write_zeroes_pct: 0.0,
                        })
                        .collect()
                } else {
                    vec![Segment {
                        weight: 1,
                        read_bs: rbs,
                        write_bs: wbs,
                        read_pct,
                        random_pct: random as f64,
                        align: None,
                        trim_pct: 0.0,
                        write_zeroes_pct: 0.0,
                    }]
                };
                let sync = sync && n == 1;
                let writes = read < 100;
                let w = Workload {
                    name: Some("job".into()),
                    segments,
                    qd: if sync { 1 } else { qd },
                    workers,
                    ramp: Duration::from_millis(ramp_ms),
                    time: Duration::from_millis(time_ms),
                    span: span.map(|m| m << 20),
                    flush_every: if writes { flush } else { 0 },
                    fua_pct: 0.0,
                    // Whole I/Os per second per fio job, in reads or writes alone.
                    rate: rate
                        .filter(|_| read == 0 || read == 100)
                        .map(|r| (r * workers as u64) as f64 / n as f64),
                    arrival: if poisson && rate.is_some() && (read == 0 || read == 100) {
                        Arrival::Poisson
                    } else {
                        Arrival::Fixed
                    },
                };
                let targets = (0..n)
                    .map(|i| FioTarget::Path(format!("/dev/shm/t:{i}")))
                    .collect();
                let setup = Setup {
                    engine: Some(if sync { "sync" } else { "io_uring" }.into()),
                    // Unsaid, sanbench and fio default differently for block devices: the
                    // export says so in a comment, outside the subset.
                    direct: Some(direct),
                    keep_cache: keep,
                    verify,
                    compress: compress as f64,
                    dedupe: dedupe as f64,
                    // Placement rides on two other draws (independent of what they mean).
                    cpus: verify.then(|| "0-1".to_string()),
                    cpus_split: verify && keep,
                };
                (w, targets, setup)
            },
        )
}

proptest! {
    #[test]
    fn workload_to_fio_and_back_is_the_identity((w, targets, setup) in arb_workload()) {
        let text = export_section("job", &w, &targets, &setup).unwrap();
        let back = import(&jobs(&text)[0], &ImportOptions::default())
            .unwrap_or_else(|e| panic!("{text}\n{e:?}"));
        prop_assert_eq!(&back.workload, &w, "{}", text);
        prop_assert_eq!(&back.setup, &setup, "{}", text);
        let paths: Vec<FioTarget> = back.targets.iter().map(|t| FioTarget::Path(t.clone())).collect();
        prop_assert_eq!(paths, targets);
    }
}

#[test]
fn what_fio_cannot_express_is_said() {
    let mut w = Workload::from_toml(
        "[[segment]]\nweight = 1\nbs = \"4k\"\nread = 100\nrandom = 100\n\
         [[segment]]\nweight = 1\nbs = \"64k\"\nread = 0\nrandom = 0\n",
    )
    .unwrap();
    w.fua_pct = 10.0;
    let t = [FioTarget::Path("/x".into())];
    let text = export_section("mixed", &w, &t, &Setup::default()).unwrap();
    assert!(text.contains("# sanbench: 2 segments with their own read/random mixes"));
    assert!(text.contains("rw=randrw\nrwmixread=50\npercentage_random=50"));
    assert!(text.contains("bs=4k,64k"), "{text}");
    assert!(text.contains("FUA"));
    assert!(FioTarget::of("mem:1G")
        .unwrap_err()
        .contains("fio cannot reach"));
    assert!(FioTarget::of("nvme+tcp://h/n").is_err());
    assert_eq!(
        FioTarget::of("nbd://127.0.0.1:1/x").unwrap(),
        FioTarget::Nbd("nbd://127.0.0.1:1/x".into())
    );
}

/// fio's trim-only jobs come in as trim-only segments and go back out as the same rw; a mix
/// of trims with reads and writes, and write-zeroes, have no fio job and say why.
#[test]
fn trims_round_trip_where_fio_can_express_them() {
    let job = "[t]\nfilename=/dev/shm/t.img\nrw=randtrim\nbs=64k\niodepth=8\ntime_based\n\
               runtime=10\n";
    let w = one(job, &[]).unwrap().workload;
    let s = &w.segments[0];
    assert_eq!((s.read_pct, s.trim_pct, s.write_pct()), (0.0, 100.0, 0.0));
    assert_eq!((s.write_bs, s.random_pct), (65536, 100.0));
    let t = [FioTarget::Path("/dev/shm/t.img".into())];
    let text = export_section("t", &w, &t, &Setup::default()).unwrap();
    assert!(text.contains("\nrw=randtrim\n"), "{text}");
    assert_eq!(one(&text, &[]).unwrap().workload.segments, w.segments);
    let seq = one(&job.replace("randtrim", "trim"), &[]).unwrap().workload;
    assert_eq!(seq.segments[0].random_pct, 0.0);
    let text = export_section("t", &seq, &t, &Setup::default()).unwrap();
    assert!(text.contains("\nrw=trim\n"), "{text}");

    let e = one(&job.replace("randtrim", "trimwrite"), &[]).unwrap_err();
    assert!(e[0].contains("right after trimming"), "{e:?}");
    let mix = Workload::from_toml("[[segment]]\nbs = \"4k\"\nread = 75\ntrim = 1\n").unwrap();
    let e = export_section("m", &mix, &t, &Setup::default()).unwrap_err();
    assert!(e.contains("#534"), "{e}");
    let z = Workload::from_toml("[[segment]]\nbs = \"4k\"\nwrite_zeroes = 5\n").unwrap();
    let e = export_section("z", &z, &t, &Setup::default()).unwrap_err();
    assert!(e.contains("no write-zeroes"), "{e}");
}

/// Passthrough targets: nvme-ng: as fio's io_uring_cmd engine (cmd_type=nvme), sg: as its sg
/// engine, each read back as the same target; bsg: has no fio job (fio 3.33's sg engine
/// speaks the sg driver's interface only) and says what to give instead.
#[test]
fn passthrough_targets_as_fios_engines() {
    let w = Workload::from_toml("[[segment]]\nbs = \"4k\"\nread = 70\n").unwrap();
    for (uri, engine, more) in [
        ("nvme-ng:/dev/ng0n1", "io_uring_cmd", "\ncmd_type=nvme\n"),
        ("sg:/dev/sg2", "sg", "\n"),
    ] {
        let t = [FioTarget::of(uri).unwrap()];
        let text = export_section("p", &w, &t, &Setup::default()).unwrap();
        assert!(
            text.contains(&format!("\nioengine={engine}\n")) && text.contains(more),
            "{text}"
        );
        assert!(!text.contains("direct="), "{text}");
        let back = one(&text, &[]).unwrap();
        assert_eq!(back.targets, [uri], "{text}");
        assert_eq!(back.workload.segments[0].read_pct, 70.0);
    }
    let e = FioTarget::of("bsg:/dev/bsg/0:0:0:0").unwrap_err();
    assert!(e.contains("sg:/dev/sgN"), "{e}");
    // Passthrough and block devices are different engines: not one job.
    let t = [
        FioTarget::of("sg:/dev/sg2").unwrap(),
        FioTarget::Path("/dev/sdb".into()),
    ];
    assert!(export_section("p", &w, &t, &Setup::default()).is_err());
    let e = one(
        "[x]\nioengine=io_uring_cmd\ncmd_type=ctrl\nfilename=/dev/ng0n1\n",
        &[],
    )
    .unwrap_err();
    assert!(e.iter().any(|l| l.contains("cmd_type")), "{e:?}");
}
