//! A sanbench workload as a fio job section: the same access specification, load, timing and
//! opening, for the targets fio can reach. What fio cannot express is said in a `#` comment
//! above the option it concerns, never left out silently. [`super::import`] reads what this
//! writes back into the same workload (the round trip is property-tested in tests.rs).

use std::fmt::Write as _;

use super::{sizes, value, Setup};
use sanbench_doc::spec::{Arrival, Workload};
use sanbench_units::target::{parse_target, Passthrough, TargetUri};

/// A target as fio reaches it.
#[derive(Clone, Debug, PartialEq)]
pub enum FioTarget {
    /// A file or block device.
    Path(String),
    /// fio's nbd engine (libnbd) with `uri=`.
    Nbd(String),
    /// fio's libiscsi engine, the URI as `filename`.
    Iscsi(String),
    /// fio's null engine of this many bytes.
    Null(u64),
    /// A file or block device named by the environment variable when fio runs (a suite's
    /// jobs, written before any target is known).
    Env(String),
    /// fio's io_uring_cmd engine (`cmd_type=nvme`) on a namespace's generic device.
    NvmeNg(String),
    /// fio's sg engine on a SCSI generic device.
    Sg(String),
}

impl FioTarget {
    /// How fio reaches a sanbench target, or why it cannot.
    pub fn of(s: &str) -> Result<FioTarget, String> {
        match parse_target(s)? {
            TargetUri::Null { size } => Ok(FioTarget::Null(size)),
            TargetUri::File { path } => Ok(FioTarget::Path(path.display().to_string())),
            TargetUri::Mem { .. } => Err(format!(
                "{s}: fio cannot reach sanbench's in-process RAM disk (serve it: sanbench serve \
                 nbd, then nbd://...)"
            )),
            TargetUri::Passthrough { kind, path } => {
                let p = path.display().to_string();
                match kind {
                    Passthrough::NvmeNg => Ok(FioTarget::NvmeNg(p)),
                    Passthrough::Sg => Ok(FioTarget::Sg(p)),
                    // fio's sg engine sends the sg driver's v3 header, which bsg refuses
                    // (bsg support in fio came with its PRs #2102/#2123, after 3.33).
                    Passthrough::Bsg => Err(format!(
                        "{s}: fio's sg engine speaks the sg driver's interface, not bsg's: give \
                         sg:/dev/sgN of the same SCSI device"
                    )),
                }
            }
            TargetUri::Network { scheme, uri } => match scheme.as_str() {
                "nbd" | "nbd+unix" | "nbds" | "nbds+unix" => Ok(FioTarget::Nbd(uri)),
                "iscsi" => Ok(FioTarget::Iscsi(uri)),
                _ => Err(format!(
                    "{s}: fio has no engine for {scheme} (connect the kernel's initiator and \
                     give its block device)"
                )),
            },
        }
    }

    fn kind(&self) -> u8 {
        match self {
            FioTarget::Path(_) | FioTarget::Env(_) => 0,
            FioTarget::Nbd(_) => 1,
            FioTarget::Iscsi(_) => 2,
            FioTarget::Null(_) => 3,
            FioTarget::NvmeNg(_) => 4,
            FioTarget::Sg(_) => 5,
        }
    }
}

fn fmt_pct(p: f64) -> String {
    format!("{}", p.round() as u64)
}

/// One job section (`[name]` and its options) doing what `w` does to `targets` opened as
/// `setup` says. Fails only for targets one fio job cannot hold together.
pub fn export_section(
    name: &str,
    w: &Workload,
    targets: &[FioTarget],
    setup: &Setup,
) -> Result<String, String> {
    let Some(first) = targets.first() else {
        return Err("no target to write a fio job for".into());
    };
    if targets.iter().any(|t| t.kind() != first.kind()) {
        return Err(
            "one fio job opens its targets with one engine: give targets of one kind".into(),
        );
    }
    if matches!(first, FioTarget::Nbd(_) | FioTarget::Null(_)) && targets.len() > 1 {
        return Err("fio's nbd and null engines open one target per job: give one".into());
    }
    // fio trims only in a job of its own (rw=trim, randtrim): no share of them among reads
    // and writes (fio issue #534), and it has no write-zeroes op at all.
    if w.has_write_zeroes() {
        return Err(
            "fio has no write-zeroes op: a workload with write_zeroes has no fio job".into(),
        );
    }
    let trims_only = w.segments.iter().all(|s| s.trim_pct == 100.0);
    if w.has_trims() && !trims_only {
        return Err(
            "fio cannot mix trims into reads and writes in one job (fio issue #534: rw=trim and \
             randtrim trim only): give every segment trim = 100, or drop the trims"
                .into(),
        );
    }
    let n = targets.len() as u64;
    let mut out = String::new();
    let mut pending: Vec<String> = Vec::new();
    let mut opts: Vec<(String, String)> = Vec::new();
    let mut set = |comments: &mut Vec<String>, k: &str, v: String| {
        opts.push((std::mem::take(comments).join("\n"), format!("{k}={v}")));
    };

    // The engine and the targets.
    match first {
        FioTarget::Path(_) | FioTarget::Env(_) => {
            let sync = setup.engine.as_deref() == Some("sync");
            if sync && w.qd > 1 {
                pending.push(format!(
                    "# sanbench's sync engine keeps {} I/Os in flight on threads; fio's psync \
                     keeps one, so io_uring stands in",
                    w.qd
                ));
            }
            let e = if sync && w.qd == 1 {
                "psync"
            } else {
                "io_uring"
            };
            if trims_only {
                pending.push(
                    "# fio trims a file or device with BLKDISCARD: fio 3.33 (the version tested) \
                     fails it on a regular file (ENOTTY), where sanbench punches a hole; a block \
                     device or fio's nbd engine trims"
                        .into(),
                );
            }
            set(&mut pending, "ioengine", e.into());
            // A trim-only job has no buffers for io_uring to register (fixedbufs: EFAULT).
            if e == "io_uring" && !trims_only {
                // sanbench's ring registers its files and its buffers; fio's can too.
                set(&mut pending, "fixedbufs", "1".into());
                set(&mut pending, "registerfiles", "1".into());
            }
            let names: Vec<String> = targets
                .iter()
                .map(|t| match t {
                    FioTarget::Path(p) => value::escape_filename(p),
                    FioTarget::Env(v) => format!("${{{v}}}"),
                    _ => unreachable!("one kind"),
                })
                .collect();
            set(&mut pending, "filename", names.join(":"));
        }
        FioTarget::Nbd(uri) => {
            set(&mut pending, "ioengine", "nbd".into());
            set(&mut pending, "uri", uri.clone());
        }
        FioTarget::Iscsi(_) => {
            pending.push(
                "# fio's libiscsi engine: fio must be built with it (Debian's fio 3.33 is not)"
                    .into(),
            );
            set(&mut pending, "ioengine", "libiscsi".into());
            let names: Vec<String> = targets
                .iter()
                .map(|t| match t {
                    FioTarget::Iscsi(u) => value::escape_filename(u),
                    _ => unreachable!("one kind"),
                })
                .collect();
            set(&mut pending, "filename", names.join(":"));
        }
        FioTarget::Null(_) => set(&mut pending, "ioengine", "null".into()),
        FioTarget::NvmeNg(_) | FioTarget::Sg(_) => {
            let ng = matches!(first, FioTarget::NvmeNg(_));
            if ng {
                if trims_only {
                    pending.push(
                        "# fio's io_uring_cmd engine trims from fio PR #1545 (2023), after \
                         3.33 (the version tested)"
                            .into(),
                    );
                }
                set(&mut pending, "ioengine", "io_uring_cmd".into());
                set(&mut pending, "cmd_type", "nvme".into());
            } else {
                pending.push(
                    "# fio's sg engine keeps iodepth commands in flight on the sg device's \
                     asynchronous interface; sanbench's sends SG_IO on a thread per slot"
                        .into(),
                );
                if trims_only {
                    pending.push(
                        "# sanbench sends a submit's trims as one UNMAP; fio's sg engine does \
                         on a character device with iodepth_batch (fio PR #626)"
                            .into(),
                    );
                }
                set(&mut pending, "ioengine", "sg".into());
            }
            let names: Vec<String> = targets
                .iter()
                .map(|t| match t {
                    FioTarget::NvmeNg(p) | FioTarget::Sg(p) => value::escape_filename(p),
                    _ => unreachable!("one kind"),
                })
                .collect();
            set(&mut pending, "filename", names.join(":"));
        }
    }

    // Direction, mix, randomness: one for the whole job in fio.
    let total: f64 = w
        .segments
        .iter()
        .map(|s| s.weight as f64)
        .sum::<f64>()
        .max(1.0);
    let avg = |f: &dyn Fn(&sanbench_doc::spec::Segment) -> f64| {
        w.segments
            .iter()
            .map(|s| f(s) * s.weight as f64)
            .sum::<f64>()
            / total
    };
    let uniform = w.segments.windows(2).all(|p| {
        p[0].read_pct == p[1].read_pct
            && p[0].random_pct == p[1].random_pct
            && p[0].align == p[1].align
    });
    if !uniform {
        pending.push(format!(
            "# sanbench: {} segments with their own read/random mixes; fio draws one mix per \
             job, so this is fio's closest form: the segments' weighted mix and sizes",
            w.segments.len()
        ));
    }
    let read = avg(&|s| s.read_pct);
    let random = avg(&|s| s.random_pct);
    let (reads, writes) = (read > 0.0, read < 100.0);
    let rw = match (random > 0.0, reads, writes) {
        (false, _, _) if trims_only => "trim",
        (true, _, _) if trims_only => "randtrim",
        (false, true, false) => "read",
        (false, false, true) => "write",
        (false, _, _) => "rw",
        (true, true, false) => "randread",
        (true, false, true) => "randwrite",
        (true, _, _) => "randrw",
    };
    set(&mut pending, "rw", rw.into());
    if reads && writes {
        if read.fract() != 0.0 {
            pending.push(format!("# fio's rwmixread is whole: {read} % rounded"));
        }
        set(&mut pending, "rwmixread", fmt_pct(read));
    }
    if random > 0.0 && random < 100.0 {
        if random.fract() != 0.0 {
            pending.push(format!(
                "# fio's percentage_random is whole: {random} % rounded"
            ));
        }
        set(&mut pending, "percentage_random", fmt_pct(random));
    }

    // Sizes.
    let pct100 = |p: f64| (p * 100.0).round() as u64;
    let with_pct: Vec<(u64, u64, u64, u64)> = w
        .segments
        .iter()
        .filter(|s| s.weight > 0)
        .map(|s| (s.read_bs, s.write_bs, s.weight as u64, pct100(s.read_pct)))
        .collect();
    // The size of a direction a segment never issues does not matter: it takes the other's.
    let segs: Vec<(u64, u64, u64)> = with_pct
        .iter()
        .map(|&(r, wr, wt, p)| match p {
            0 => (wr, wr, wt),
            10_000 => (r, r, wt),
            _ => (r, wr, wt),
        })
        .collect();
    let (rd, wd) = sizes::marginals(&with_pct);
    // A direction never issued has no sizes of its own: the other's stand in.
    let (rd, wd) = match (reads, writes) {
        (false, _) => (wd.clone(), wd),
        (_, false) => (rd.clone(), rd),
        _ => (rd, wd),
    };
    let fmt_bs = |r: String, w: String| {
        if !writes || !reads || r == w {
            if reads {
                r
            } else {
                w
            }
        } else {
            format!("{r},{w}")
        }
    };
    if rd.len() == 1 && wd.len() == 1 {
        set(
            &mut pending,
            "bs",
            fmt_bs(value::fmt_size(rd[0].0), value::fmt_size(wd[0].0)),
        );
    } else {
        let mut mine = segs.clone();
        mine.sort();
        let mut product = sizes::segments(&rd, &wd, reads, writes);
        product.sort();
        let g = mine.iter().fold(0, |g, e| sizes::gcd(g, e.2)).max(1);
        mine.iter_mut().for_each(|e| e.2 /= g);
        if mine != product && uniform {
            pending.push(
                "# fio draws read and write sizes apart: each direction's sizes in the \
                 segments' shares is its closest form"
                    .into(),
            );
        }
        if random < 100.0 {
            pending.push(
                "# several sizes with sequential I/O: fio keeps one cursor, sanbench one per \
                 segment"
                    .into(),
            );
        }
        let split = |d: &sizes::Dist, pending: &mut Vec<String>| match sizes::fmt_split(d) {
            Some(s) => s,
            None => {
                pending.push("# fio's bssplit shares are whole percentages: rounded".into());
                sizes::rounded_split(d)
            }
        };
        let r = split(&rd, &mut pending);
        let wsplit = if rd == wd {
            r.clone()
        } else {
            split(&wd, &mut pending)
        };
        set(&mut pending, "bssplit", fmt_bs(r, wsplit));
    }
    let min_bs = [(reads, &rd), (writes, &wd)]
        .iter()
        .filter(|(u, _)| *u)
        .filter_map(|(_, d)| d.first().map(|e| e.0))
        .min();
    let align = w.segments.first().and_then(|s| s.align);
    let multi = rd.len() > 1 || wd.len() > 1;
    match align {
        Some(a) if !(multi && Some(a) == min_bs) => {
            set(&mut pending, "blockalign", value::fmt_size(a))
        }
        None if multi => pending.push(
            "# sanbench aligns each random I/O to its own size; fio aligns all to the smallest"
                .into(),
        ),
        _ => {}
    }

    // Load and time.
    let depth_per = match first {
        FioTarget::Nbd(_) | FioTarget::Null(_) => 1,
        _ => n,
    };
    if depth_per > 1 {
        pending.push(format!(
            "# fio's iodepth is the job's over its {depth_per} files; sanbench's qd {} is per target",
            w.qd
        ));
    }
    set(
        &mut pending,
        "iodepth",
        (w.qd as u64 * depth_per).to_string(),
    );
    set(&mut pending, "numjobs", w.workers.to_string());
    // sanbench's streams are threads of one process. fio forks each job and puts it in a
    // session of its own (setsid), and where the kernel groups sessions for scheduling
    // (autogroup) that keeps each job with its io-wq workers: on a 2-CPU VM fio's default ran
    // two jobs at a steady 0.78-0.82M IOPS where fio's own threads and sanbench ran 0.61-0.84M
    // (docs/FIO.md). The job runs fio's jobs as threads, as sanbench's.
    set(&mut pending, "thread", "1".into());
    if w.workers > 1 {
        set(&mut pending, "group_reporting", "1".into());
    }
    match (first, w.span) {
        (FioTarget::Null(sz), span) => set(
            &mut pending,
            "size",
            value::fmt_size(span.unwrap_or(*sz).min(*sz)),
        ),
        (_, Some(span)) => set(&mut pending, "size", value::fmt_size(span * depth_per)),
        _ => {}
    }
    set(&mut pending, "time_based", "1".into());
    set(&mut pending, "runtime", value::fmt_time(w.time));
    if !w.ramp.is_zero() {
        set(&mut pending, "ramp_time", value::fmt_time(w.ramp));
    }
    set(&mut pending, "norandommap", "1".into());

    // Opening and data.
    match setup.direct {
        Some(true) => set(&mut pending, "direct", "1".into()),
        Some(false) => set(&mut pending, "direct", "0".into()),
        None if matches!(first, FioTarget::Path(_) | FioTarget::Env(_)) => pending.push(
            "# sanbench opens files through the page cache and block devices with O_DIRECT; \
             fio uses the page cache unless direct=1"
                .into(),
        ),
        None => {}
    }
    if setup.keep_cache {
        set(&mut pending, "invalidate", "0".into());
    }
    // fio's buffers sit wherever its heap puts them unless aligned; sanbench's slots start on
    // page boundaries. Where a buffer starts within its page moves the kernel's copy to and
    // from the page cache by up to 20 % (docs/FIO.md), so fio's are placed as sanbench's.
    set(&mut pending, "iomem_align", "4k".into());
    if let Some(cpus) = &setup.cpus {
        set(&mut pending, "cpus_allowed", cpus.clone());
    }
    if setup.cpus_split {
        set(&mut pending, "cpus_allowed_policy", "split".into());
    }
    if let Some(rate) = w.rate {
        // fio's rate_iops is each job's (each numjobs clone's) over its files.
        let per_job = rate * depth_per as f64 / w.workers as f64;
        if per_job.fract() != 0.0 {
            pending.push(format!(
                "# fio's rate_iops is whole: {per_job} per job rounded"
            ));
        }
        set(
            &mut pending,
            "rate_iops",
            format!("{}", per_job.round().max(1.0)),
        );
        if w.arrival == Arrival::Poisson {
            set(&mut pending, "rate_process", "poisson".into());
        }
    }
    if w.flush_every > 0 {
        // Files flush with fdatasync in sanbench; fio's nbd and libiscsi engines flush on fsync.
        let k = if matches!(first, FioTarget::Path(_) | FioTarget::Env(_)) {
            "fdatasync"
        } else {
            "fsync"
        };
        set(&mut pending, k, w.flush_every.to_string());
    }
    if w.fua_pct > 0.0 {
        pending.push(format!(
            "# sanbench sends {} % of writes with FUA; fio cannot mark a share of its writes",
            w.fua_pct
        ));
    }
    if setup.verify {
        pending.push(
            "# sanbench checks reads against its own stamps; fio verifies with its own headers"
                .into(),
        );
        set(&mut pending, "verify", "crc32c".into());
    }
    if setup.compress > 0.0 {
        set(
            &mut pending,
            "buffer_compress_percentage",
            fmt_pct(setup.compress),
        );
    }
    if setup.dedupe > 0.0 {
        set(&mut pending, "dedupe_percentage", fmt_pct(setup.dedupe));
    }
    pending.push(
        "# sanbench writes unique stamped data; fio re-sends its buffers lightly scrambled \
         (refill_buffers=1 makes each write new, at a CPU cost per write that sanbench's stamp \
         does not have)"
            .into(),
    );

    let _ = writeln!(out, "[{name}]");
    for (c, o) in opts {
        if !c.is_empty() {
            let _ = writeln!(out, "{c}");
        }
        let _ = writeln!(out, "{o}");
    }
    for c in pending {
        let _ = writeln!(out, "{c}");
    }
    Ok(out)
}
