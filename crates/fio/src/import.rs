//! A fio job section as a sanbench [`Workload`], its targets and how they are opened.
//!
//! Every option is either mapped, accepted because it changes nothing sanbench measures
//! (reporting, job ordering), or reported: one line per option, naming where it was written,
//! unless the caller ignores it by name. A value sanbench cannot express is reported the same
//! way, under its option's name. Nothing is dropped without a word.

use std::collections::HashMap;
use std::time::Duration;

use super::ini::Section;
use super::job_opts::Ctx;
use super::options::{canonical, why, MAPPED, NO_EFFECT};
use super::{sizes, value, Setup};
use sanbench_doc::spec::{Arrival, Segment, Workload};

/// A mapped job.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub name: String,
    /// `time` is zero when the job gives no runtime (the caller's --time must then).
    pub workload: Workload,
    /// Target URIs or paths; empty when the caller gives its own.
    pub targets: Vec<String>,
    pub setup: Setup,
    /// What differs in kind though it maps (an engine stood in for, a check done otherwise).
    pub notes: Vec<String>,
}

/// How a section is read.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Options to run without (as written or by fio's other name).
    pub ignore: Vec<String>,
    /// The caller names this many targets itself: `filename`, `directory` and `uri` are not
    /// read, and `iodepth` and `size` are split over these.
    pub cli_targets: Option<usize>,
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Read,
    Write,
    Mixed,
    /// rw=trim or randtrim: every I/O trims.
    Trim,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Files,
    Null,
    Nbd,
    Iscsi,
    /// io_uring_cmd with cmd_type=nvme: the files are namespaces' generic devices.
    NvmeNg,
    /// sg: the files are SCSI generic devices.
    Sg,
}

/// Maps one job section. `Err` holds one line per problem.
pub fn import(s: &Section, o: &ImportOptions) -> Result<Imported, Vec<String>> {
    let mut opts = HashMap::new();
    for (i, opt) in s.options.iter().enumerate() {
        opts.insert(canonical(&opt.key).to_string(), (i, opt));
    }
    let mut c = Ctx {
        section: &s.name,
        opts,
        ignore: &o.ignore,
        problems: Vec::new(),
    };
    let mut unknown: Vec<(usize, String)> = c
        .opts
        .iter()
        .filter(|(k, _)| !MAPPED.contains(&k.as_str()) && !NO_EFFECT.contains(&k.as_str()))
        .map(|(k, v)| (v.0, k.clone()))
        .collect();
    unknown.sort();
    for (_, k) in unknown {
        c.problem(&k, why(&k));
    }
    let mut notes = Vec::new();
    let mut setup = Setup::default();

    let kb = c
        .parse("kb_base", |v| match v {
            "1024" => Ok(1024),
            "1000" => Ok(1000),
            _ => Err("kb_base is 1024 or 1000".to_string()),
        })
        .unwrap_or(1024);

    let engine = c.get("ioengine").unwrap_or("psync");
    let kind = match engine {
        "io_uring" => {
            setup.engine = Some("io_uring".into());
            Kind::Files
        }
        "libaio" | "posixaio" => {
            setup.engine = Some("io_uring".into());
            notes.push(format!(
                "ioengine={engine} runs as sanbench's io_uring engine (asynchronous, as {engine})"
            ));
            Kind::Files
        }
        "psync" | "sync" | "pvsync" | "pvsync2" | "vsync" => {
            setup.engine = Some("sync".into());
            Kind::Files
        }
        "null" => Kind::Null,
        "nbd" => Kind::Nbd,
        "libiscsi" => Kind::Iscsi,
        "io_uring_cmd" => {
            match c.get("cmd_type").unwrap_or("nvme") {
                "nvme" => {}
                other => c.problem(
                    "cmd_type",
                    format!("sanbench's nvme-ng: engine sends NVMe commands, not {other}"),
                ),
            }
            Kind::NvmeNg
        }
        "sg" => Kind::Sg,
        other => {
            c.problem(
                "ioengine",
                format!("sanbench has no engine for {other} (io_uring, libaio, psync, sync, pvsync, null, nbd, libiscsi, io_uring_cmd, sg)"),
            );
            Kind::Files
        }
    };

    // Direction and randomness.
    let (dir, random) = match c.get("rw") {
        None => (Dir::Read, false),
        Some(v) => {
            let (base, suffix) = match v.split_once(':') {
                Some((b, s)) => (b, Some(s)),
                None => (v, None),
            };
            let m = match base {
                "read" => Some((Dir::Read, false)),
                "write" => Some((Dir::Write, false)),
                "randread" => Some((Dir::Read, true)),
                "randwrite" => Some((Dir::Write, true)),
                "rw" | "readwrite" => Some((Dir::Mixed, false)),
                "randrw" => Some((Dir::Mixed, true)),
                // Trims only: writes' sizes (bs=4k gives fio's trims theirs too).
                "trim" => Some((Dir::Trim, false)),
                "randtrim" => Some((Dir::Trim, true)),
                "trimwrite" | "randtrimwrite" => {
                    c.problem(
                        "rw",
                        "fio writes each block right after trimming it; sanbench draws trims and \
                         writes apart (--trim 50 --read 0 is the nearest mix)",
                    );
                    None
                }
                _ => {
                    c.problem("rw", "not one of fio's rw values");
                    None
                }
            };
            let (d, r) = m.unwrap_or((Dir::Read, false));
            if let Some(n) = suffix {
                // The no-op values: a new random offset every I/O, no gap between sequential ones.
                let noop = if r { "1" } else { "0" };
                if n.trim() != noop {
                    c.problem(
                        "rw",
                        "the :N suffix (sequential gaps, or runs of I/Os per random offset) \
                         has no sanbench equivalent",
                    );
                }
            }
            (d, r)
        }
    };
    let trim_pct = if dir == Dir::Trim { 100.0 } else { 0.0 };
    // Trims take the writes' sizes and offsets from here on.
    let dir = if dir == Dir::Trim { Dir::Write } else { dir };
    let read_pct = match dir {
        Dir::Read => 100,
        Dir::Write | Dir::Trim => 0,
        Dir::Mixed => {
            let r = c.parse("rwmixread", value::pct);
            let w = c.parse("rwmixwrite", value::pct).map(|w| 100 - w);
            match (r, w) {
                (Some(r), Some(w)) => {
                    if c.order("rwmixread") > c.order("rwmixwrite") {
                        r
                    } else {
                        w
                    }
                }
                (r, w) => r.or(w).unwrap_or(50),
            }
        }
    };
    let (reads, writes) = (read_pct > 0, read_pct < 100);
    let pick = |c: &mut Ctx, key: &str, (r, w): (Option<u64>, Option<u64>)| -> Option<u64> {
        match dir {
            Dir::Read => r,
            Dir::Write | Dir::Trim => w,
            Dir::Mixed if r == w => r,
            Dir::Mixed => {
                c.problem(
                    key,
                    "reads and writes differ; a sanbench segment has one value",
                );
                r
            }
        }
    };
    let pr = c.parse("percentage_random", per_ddir_pct);
    let ps = c.parse("percentage_sequential", per_ddir_pct);
    let random_pct = if !random {
        0
    } else if ps.is_some() && c.order("percentage_sequential") > c.order("percentage_random") {
        100 - pick(&mut c, "percentage_sequential", ps.unwrap_or_default()).unwrap_or(0)
    } else {
        pr.and_then(|p| pick(&mut c, "percentage_random", p))
            .unwrap_or(100)
    };

    // Sizes.
    let (mut rd, mut wd) = (sizes::single(4096), sizes::single(4096));
    let given = |c: &Ctx, k: &str| c.opts.contains_key(k) && !c.ignored(k);
    let size_key = if given(&c, "bssplit") {
        "bssplit"
    } else if given(&c, "bsrange") && (!given(&c, "bs") || c.order("bsrange") > c.order("bs")) {
        "bsrange"
    } else {
        "bs"
    };
    if let Some(v) = c.get(size_key) {
        let (r, w) = value::per_ddir(v);
        let one = |s: &str| -> Result<sizes::Dist, String> {
            match size_key {
                "bssplit" => sizes::split(s, kb),
                "bsrange" => sizes::range(s, kb),
                _ => value::size(s, kb).and_then(|b| {
                    if b == 0 {
                        Err("a size of 0".into())
                    } else {
                        Ok(sizes::single(b))
                    }
                }),
            }
        };
        for (side, dist) in [(r, &mut rd), (w, &mut wd)] {
            if let Some(s) = side {
                match one(s) {
                    Ok(d) => *dist = d,
                    Err(e) => c.problem(size_key, e),
                }
            }
        }
    }
    let segs = sizes::segments(&rd, &wd, reads, writes);
    if segs.len() > sizes::MAX_SEGMENTS {
        c.problem(
            size_key,
            format!(
                "{} read sizes x {} write sizes make {} segments; sanbench takes at most {}",
                rd.len(),
                wd.len(),
                segs.len(),
                sizes::MAX_SEGMENTS
            ),
        );
    }
    if segs.len() > 1 && random_pct < 100 {
        c.problem(
            size_key,
            "several sizes with sequential I/O: sanbench's segments keep a cursor each, fio \
             keeps one",
        );
    }
    let min_of = |d: &sizes::Dist| d.first().map_or(4096, |e| e.0);
    let align = match c.parse("blockalign", |v| {
        let (r, w) = value::per_ddir(v);
        let f = |s: Option<&str>| s.map(|s| value::size(s, kb)).transpose();
        Ok((f(r)?, f(w)?))
    }) {
        Some(p) => pick(&mut c, "blockalign", p),
        None if segs.len() > 1 => {
            // fio aligns random offsets to each direction's smallest size by default.
            let mins: Vec<u64> = [(reads, &rd), (writes, &wd)]
                .into_iter()
                .filter(|(u, _)| *u)
                .map(|(_, d)| min_of(d))
                .collect();
            mins.iter().min().copied()
        }
        None => None,
    };
    if align == Some(0) {
        c.problem("blockalign", "an alignment of 0");
    }

    // Targets.
    let mut targets = Vec::new();
    let mut size = c.parse("size", |v| value::size(v, kb));
    let mut nfiles = 1u64;
    match o.cli_targets {
        Some(n) => nfiles = n.max(1) as u64,
        None => match kind {
            Kind::Files | Kind::Iscsi | Kind::NvmeNg | Kind::Sg => {
                if c.get("directory").is_some() {
                    c.problem(
                        "directory",
                        "sanbench opens the targets it is given (filename=, or targets on the \
                         command line)",
                    );
                }
                match c.get("filename") {
                    Some(v) => targets = value::filenames(v),
                    None => c.problem(
                        "filename",
                        "no target: give filename= or targets on the command line",
                    ),
                }
                if kind == Kind::Iscsi {
                    for t in &targets {
                        if !t.starts_with("iscsi://") {
                            c.problem("filename", format!("'{t}' is not an iscsi:// URI"));
                        }
                    }
                }
                // The passthrough engines' devices, as sanbench's URIs name them.
                let scheme = match kind {
                    Kind::NvmeNg => Some("nvme-ng"),
                    Kind::Sg => Some("sg"),
                    _ => None,
                };
                if let Some(scheme) = scheme {
                    targets = targets.iter().map(|t| format!("{scheme}:{t}")).collect();
                }
                nfiles = targets.len().max(1) as u64;
            }
            Kind::Nbd => match c.get("uri") {
                Some(u) => targets.push(u.to_string()),
                None => c.problem("uri", "fio's nbd engine needs uri="),
            },
            Kind::Null => match size.take() {
                Some(b) => targets.push(format!("null:{b}")),
                None => c.problem("size", "the null engine needs a size"),
            },
        },
    }
    let iodepth = c.parse("iodepth", value::uint).unwrap_or(1);
    let qd = if setup.engine.as_deref() == Some("sync") {
        if iodepth > 1 {
            notes.push(format!(
                "ioengine={engine} keeps one I/O in flight whatever iodepth={iodepth} says: queue \
                 depth 1"
            ));
        }
        1
    } else if !iodepth.is_multiple_of(nfiles) || iodepth == 0 {
        c.problem(
            "iodepth",
            format!("{iodepth} I/Os do not divide evenly over {nfiles} targets"),
        );
        1
    } else {
        iodepth / nfiles
    };
    let workers = c.parse("numjobs", value::uint).unwrap_or(1);
    let span = size.map(|b| b / nfiles);
    if c.parse("offset", |v| value::size(v, kb))
        .is_some_and(|v| v != 0)
    {
        c.problem("offset", "sanbench uses each target from offset 0");
    }

    // Time.
    let runtime = c.parse("runtime", value::time);
    let time_based = c.parse("time_based", |v| value::boolean(Some(v)));
    if runtime.is_some() && time_based != Some(true) && !c.ignored("time_based") {
        let at = c.opts.get("runtime").map_or("", |o| o.1.at.as_str());
        c.problems.push(format!(
            "{at}: [{}] time_based: not set: fio stops after one pass over size, sanbench runs \
             for the runtime (--fio-ignore time_based runs for the runtime)",
            s.name
        ));
    }
    let ramp = c.parse("ramp_time", value::time).unwrap_or(Duration::ZERO);

    // Opening.
    let direct = c.parse("direct", |v| value::boolean(Some(v)));
    let buffered = c.parse("buffered", |v| value::boolean(Some(v))).map(|b| !b);
    setup.direct = match (direct, buffered) {
        (Some(d), Some(b)) if c.order("buffered") > c.order("direct") => {
            let _ = d;
            Some(b)
        }
        // fio's default is the page cache, for block devices too (sanbench's is O_DIRECT there).
        (d, b) => d.or(b).or((kind == Kind::Files).then_some(false)),
    };
    if let Some(inv) = c.parse("invalidate", |v| value::boolean(Some(v))) {
        setup.keep_cache = !inv;
    }
    // sanbench's buffers are always page-aligned (each slot a multiple of a page), which
    // satisfies any alignment that divides a page; a coarser one it cannot promise.
    c.parse("iomem_align", |v| match value::size(v, kb)? {
        a if a == 0 || (sanbench_io::arena::ALIGN as u64).is_multiple_of(a) => Ok(()),
        a => Err(format!(
            "sanbench aligns its buffers to {} bytes, not {a}",
            sanbench_io::arena::ALIGN
        )),
    });
    // Placement: the CPU list is checked against the host by the CLI.
    setup.cpus = c.get("cpus_allowed").map(str::to_string);
    if let Some(split) = c.parse("cpus_allowed_policy", |v| match v {
        "shared" => Ok(false),
        "split" => Ok(true),
        _ => Err(format!("'{v}' is not a policy (shared or split)")),
    }) {
        setup.cpus_split = split;
    }

    // Pacing.
    let rate = match c.parse("rate_iops", |v| {
        let (r, w) = value::per_ddir(v);
        let f = |s: Option<&str>| s.map(value::uint).transpose();
        Ok((f(r)?, f(w)?))
    }) {
        Some(_) if dir == Dir::Mixed => {
            c.problem(
                "rate_iops",
                "fio paces reads and writes apart; a sanbench rate paces all I/Os of a mixed \
                 workload together",
            );
            None
        }
        Some(p) => pick(&mut c, "rate_iops", p),
        None => None,
    };
    let arrival = match c.get("rate_process") {
        None | Some("linear") => Arrival::Fixed,
        Some("poisson") => Arrival::Poisson,
        Some(_) => {
            c.problem("rate_process", "linear or poisson");
            Arrival::Fixed
        }
    };

    // Data.
    match c.get("verify") {
        None | Some("0") | Some("null") => {}
        Some(
            "md5" | "crc64" | "crc32c" | "crc32c-intel" | "crc32" | "crc16" | "crc7" | "xxhash"
            | "sha512" | "sha256" | "sha1" | "sha3-224" | "sha3-256" | "sha3-384" | "sha3-512"
            | "meta" | "pattern",
        ) => {
            setup.verify = true;
            notes.push(
                "verify: sanbench checks every read against its own stamps (CRC32C per block) \
                 during the run; after a write-only job, `sanbench verify` reads it back"
                    .into(),
            );
        }
        Some(_) => c.problem("verify", "not one of fio's verify methods"),
    }
    let fsync = c.parse("fsync", value::uint).unwrap_or(0);
    let fdatasync = c.parse("fdatasync", value::uint).unwrap_or(0);
    if fsync > 0 && fdatasync > 0 && fsync != fdatasync {
        c.problem(
            "fdatasync",
            "with fsync at another interval: sanbench flushes at one",
        );
    }
    let flush_every = fsync.max(fdatasync);
    if let Some(p) = c.parse("buffer_compress_percentage", value::pct) {
        setup.compress = p as f64;
    }
    if let Some(p) = c.parse("dedupe_percentage", value::pct) {
        setup.dedupe = p as f64;
    }

    let to_u32 = |c: &mut Ctx, key: &str, v: u64| -> u32 {
        u32::try_from(v).unwrap_or_else(|_| {
            c.problem(key, "out of range");
            1
        })
    };
    let qd = to_u32(&mut c, "iodepth", qd);
    let workers = to_u32(&mut c, "numjobs", workers);
    let workload = Workload {
        name: Some(s.name.clone()),
        segments: segs
            .iter()
            .map(|&(r, w, wt)| Segment {
                weight: wt as u32,
                read_bs: r,
                write_bs: w,
                read_pct: read_pct as f64,
                random_pct: random_pct as f64,
                align,
                trim_pct,
                write_zeroes_pct: 0.0,
            })
            .collect(),
        qd,
        workers,
        ramp,
        time: runtime.unwrap_or(Duration::ZERO),
        span,
        flush_every: to_u32(&mut c, "fsync", flush_every),
        fua_pct: 0.0,
        rate: rate.map(|r| r as f64 * workers as f64 / nfiles as f64),
        arrival,
    };
    if !c.problems.is_empty() {
        return Err(c.problems);
    }
    Ok(Imported {
        name: s.name.clone(),
        workload,
        targets,
        setup,
        notes,
    })
}

fn per_ddir_pct(v: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let (r, w) = value::per_ddir(v);
    Ok((
        r.map(value::pct).transpose()?,
        w.map(value::pct).transpose()?,
    ))
}
