//! `run` and `compare` called through the library, in this process, without a subprocess:
//! the arguments parsed as the binary parses them, a `Context` of our own, the document read
//! back typed. Two contexts in one process keep their state apart (no process-wide statics:
//! placement, watch, metrics registry and `mem:` targets belong to the context).

use clap::Parser;
use sanbench::args::{Cli, Command};
use sanbench_doc::{Comparison, RunDoc};
use sanbench_session::context::Context;

fn command(args: &[&str]) -> Command {
    Cli::try_parse_from(std::iter::once("sanbench").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

fn run_doc(cx: &Context, target: &str, json: &std::path::Path) -> RunDoc {
    let cmd = command(&[
        "run",
        target,
        "--bs",
        "4k",
        "--qd",
        "4",
        "--read",
        "50",
        "--random",
        "100",
        "--time",
        "300ms",
        "--ramp",
        "0",
        "--no-monitor",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    sanbench::dispatch(cx, cmd).unwrap_or_else(|e| panic!("{}", e.message()));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn run_through_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let cx = Context::local();
    let doc = run_doc(&cx, "mem:64M", &tmp.path().join("run.json"));
    assert_eq!(doc.schema, sanbench_doc::run::SCHEMA);
    let r = &doc.results[0];
    assert_eq!(r.target, "mem:64M");
    assert!(r.ios > 0 && r.read.ios > 0 && r.write.ios > 0, "{r:?}");
    // The precondition wrote the span first (mem: is sanbench's own): recorded in the
    // result and under the manifest, typed.
    assert!(r.precondition.as_ref().unwrap().preconditioned);
    let m = doc
        .manifest
        .as_ref()
        .expect("a manifest even without monitors");
    assert!(m.precondition.contains_key("mem:64M"));
}

/// A program without a command line: the workload built in code, the configuration from
/// `RunConfig::new`, the document returned typed (nothing written, nothing printed).
#[test]
fn run_from_a_typed_configuration() {
    use sanbench_doc::spec::{Arrival, Segment, Workload};
    let w = Workload {
        name: None,
        segments: vec![Segment {
            weight: 1,
            read_bs: 4096,
            write_bs: 4096,
            read_pct: 100.0,
            random_pct: 100.0,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }],
        qd: 2,
        workers: 1,
        ramp: std::time::Duration::ZERO,
        time: std::time::Duration::from_millis(300),
        span: None,
        flush_every: 0,
        fua_pct: 0.0,
        rate: None,
        arrival: Arrival::Fixed,
    };
    let cx = Context::local();
    let c = sanbench_session::run_config::RunConfig::new(vec!["mem:16M".into()], w);
    let doc = sanbench_session::run_cmd::execute(&cx, &c)
        .unwrap_or_else(|e| panic!("{}", e.message()))
        .expect("alone, the process reports");
    let r = &doc.results[0];
    assert_eq!(r.target, "mem:16M");
    assert_eq!(doc.spec.qd, 2);
    assert!(r.read.ios > 0 && r.write.ios == 0, "{r:?}");
    // No monitor by default: no host figures.
    assert!(r.cpu.is_none(), "{:?}", r.cpu);
    // A bad target is a usage error, before any I/O.
    let bad =
        sanbench_session::run_config::RunConfig::new(vec!["nosuch:x".into()], c.workload.clone());
    let Err(e) = sanbench_session::run_cmd::execute(&cx, &bad) else {
        panic!("a target of no known scheme ran");
    };
    assert_eq!(e.code(), 2, "{}", e.message());
}

#[test]
fn two_contexts_in_one_process_keep_their_targets_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (Context::local(), Context::local());
    // The same `mem:` URI in two contexts: each its own RAM disk, each written by its own run.
    let da = run_doc(&a, "mem:32M", &tmp.path().join("a.json"));
    let db = run_doc(&b, "mem:32M", &tmp.path().join("b.json"));
    for d in [&da, &db] {
        assert!(d.results[0].ios > 0);
        assert!(d.results[0].precondition.as_ref().unwrap().preconditioned);
    }
    assert_ne!(da.run_id, db.run_id);
    // Each context kept the RAM disk its run drove: asked again, it hands that one back
    // without opening another; a third context has none.
    let kept = |cx: &Context| {
        cx.mem_target("mem:32M", || {
            Err(sanbench_session::error::usage("opened again"))
        })
        .map(|t| t.info().size)
    };
    assert_eq!(kept(&a).unwrap(), 32 << 20);
    assert_eq!(kept(&b).unwrap(), 32 << 20);
    assert!(kept(&Context::local()).is_err());
    let same = |x: &Context, y: &Context| {
        let p = x.mem_target("mem:32M", || unreachable!()).unwrap();
        let q = y.mem_target("mem:32M", || unreachable!()).unwrap();
        std::sync::Arc::ptr_eq(&p, &q)
    };
    assert!(same(&a, &a));
    assert!(!same(&a, &b));
}

#[test]
fn compare_through_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let cmd = command(&[
        "compare",
        "--suite",
        "quick",
        "--repeat",
        "2",
        "--time",
        "200ms",
        "--ramp",
        "0",
        "--no-monitor",
        "--quiet",
        "--no-store",
        "--out",
        out.to_str().unwrap(),
        "a=mem:64M",
        "b=null:",
    ]);
    let cx = Context::local();
    sanbench::dispatch(&cx, cmd).unwrap_or_else(|e| panic!("{}", e.message()));
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let cmp: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(cmp.schema, sanbench_doc::COMPARE_SCHEMA);
    let names: Vec<&str> = cmp.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    // Every workload of the suite on both targets, twice.
    assert_eq!(cmp.cells.len(), cmp.workloads.len() * 2 * 2);
    assert!(cmp.cells.iter().all(|c| c.result.ios > 0));
    assert!(cmp.design.is_some());
}

/// A comparison configured in code (a suite loaded and scaled, two named targets), run by
/// `compare::execute`, the finished comparison returned typed and the same one on disk.
#[test]
fn compare_from_a_typed_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut suite = sanbench_engine::suite::load("quick").unwrap();
    suite.scale(
        Some(std::time::Duration::from_millis(200)),
        Some(std::time::Duration::ZERO),
    );
    let mut c = sanbench_session::compare::CompareConfig::new(
        suite,
        vec![("a".into(), "mem:16M".into()), ("b".into(), "null:".into())],
        out.clone(),
    );
    c.repeat = sanbench::args::RepeatArg::Fixed(2);
    let cx = Context::local();
    let done = sanbench_session::compare::execute(&cx, &c)
        .unwrap_or_else(|e| panic!("{}", e.message()))
        .expect("alone, the process reports");
    assert!(done.failure.is_none() && done.recorded.is_none());
    assert!(
        done.files.iter().any(|f| f.ends_with("results.json")),
        "{:?}",
        done.files
    );
    let cmp = done.cmp;
    assert_eq!(cmp.cells.len(), cmp.workloads.len() * 2 * 2);
    assert!(cmp.cells.iter().all(|c| c.result.ios > 0));
    let written: Comparison =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(written.cells.len(), cmp.cells.len());
    assert_eq!(written.design, cmp.design);
}

/// A program that installs its own observer gets the run's events typed (the window's
/// progress each second, its intervals, the precondition's fill, the end) and nothing is
/// drawn for it.
#[test]
fn events_go_to_the_observer_a_program_installs() {
    use sanbench_session::events::{Event, Events};
    use std::sync::{Arc, Mutex};
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);
    impl Events for Seen {
        fn event(&self, e: &Event<'_>) {
            let s = match e {
                Event::Progress(p) => format!("progress {}", p.ramping),
                Event::Interval(r) => format!("interval {} {}", r.target, r.latency.count()),
                Event::Fill { done, total, .. } => format!("fill {done}/{total}"),
                Event::Ended => "ended".into(),
            };
            self.0.lock().unwrap().push(s);
        }
    }
    let seen = Arc::new(Seen::default());
    let cx = Context::local();
    cx.set_events(seen.clone());
    let cmd = command(&[
        "run",
        "mem:16M",
        "--bs",
        "4k",
        "--qd",
        "2",
        "--read",
        "50",
        "--time",
        "1500ms",
        "--ramp",
        "0",
        "--no-monitor",
        "--quiet",
    ]);
    let c = sanbench::from_args::run::run(match cmd {
        Command::Run(a) => a,
        _ => unreachable!(),
    })
    .unwrap_or_else(|e| panic!("{}", e.message()));
    sanbench_session::run_cmd::execute(&cx, &c)
        .unwrap_or_else(|e| panic!("{}", e.message()))
        .expect("alone, the process reports");
    let seen = seen.0.lock().unwrap();
    let count = |p: &str| seen.iter().filter(|s| s.starts_with(p)).count();
    // The precondition filled the 16 MiB span first and said so up to the end.
    assert!(count("fill ") >= 1, "{seen:?}");
    assert!(
        seen.contains(&format!("fill {0}/{0}", 16u64 << 20)),
        "{seen:?}"
    );
    // A 1.5 s window: at least one second's progress, at least one finished 1 s interval
    // with I/Os in it, then the end (the fill's and the run's).
    assert!(count("progress ") >= 1, "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s.starts_with("interval 0 ") && !s.ends_with(" 0")),
        "{seen:?}"
    );
    assert!(count("ended") >= 2, "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("ended"), "{seen:?}");
}

/// `serve` through the library: an NBD server on a port the kernel picks, its ready line
/// handed over, a run against it from the same process, then stopped by the flag the
/// program holds (not the process's Ctrl-C flag): its summary counts what was written.
#[test]
fn serve_through_the_library() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    let cfg = sanbench_nbd::ServerConfig::ram("127.0.0.1:0".parse().unwrap(), 16 << 20);
    let c = sanbench_session::serve::ServeConfig {
        server: sanbench_session::serve::Server::Nbd(cfg),
        metrics_listen: None,
        cpus: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            sanbench_session::serve::execute(c, stop, &mut |line| {
                tx.send(line.to_string()).unwrap()
            })
        })
    };
    let ready = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("a ready line");
    let uri = ready
        .split_whitespace()
        .find(|w| w.starts_with("nbd://"))
        .unwrap_or_else(|| panic!("no URI in {ready:?}"))
        .to_string();
    let cx = Context::local();
    let tmp = tempfile::tempdir().unwrap();
    let doc = run_doc(&cx, &uri, &tmp.path().join("nbd.json"));
    assert!(doc.results[0].write.ios > 0, "{:?}", doc.results[0]);
    stop.store(true, Ordering::SeqCst);
    let stopped = server
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{}", e.message()));
    assert!(
        stopped.starts_with("sanbench nbd server: stopped"),
        "{stopped}"
    );
    // The precondition wrote the whole 16 MiB export.
    assert!(
        stopped.ends_with(&format!("allocated {} bytes)", 16u64 << 20)),
        "{stopped}"
    );
}
