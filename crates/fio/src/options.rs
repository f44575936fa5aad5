//! The fio options sanbench knows: those it maps (import.rs reads each), those that change
//! nothing it measures, fio's other spellings, and why it refuses some of the rest.

/// Options that change nothing sanbench measures: output and job ordering. `stonewall`: a job
/// section runs alone in sanbench anyway (`run` takes one, `compare` runs them one by one).
pub const NO_EFFECT: &[&str] = &[
    "name",
    "description",
    "group_reporting",
    "stonewall",
    "wait_for_previous",
    "new_group",
    "thread",
    "randrepeat",
    // sanbench draws random offsets with replacement (fio's norandommap=1) whatever it says.
    "norandommap",
    // sanbench fills every write afresh (stamped data) whatever it says.
    "refill_buffers",
    "scramble_buffers",
    // sanbench's io_uring ring always registers its buffers and files.
    "fixedbufs",
    "registerfiles",
];

pub const MAPPED: &[&str] = &[
    "kb_base",
    "rw",
    "rwmixread",
    "rwmixwrite",
    "percentage_random",
    "percentage_sequential",
    "bs",
    "bsrange",
    "bssplit",
    "blockalign",
    "iodepth",
    "numjobs",
    "size",
    "offset",
    "filename",
    "directory",
    "uri",
    "ioengine",
    "runtime",
    "time_based",
    "ramp_time",
    "direct",
    "buffered",
    "rate_iops",
    "rate_process",
    "verify",
    "fsync",
    "fdatasync",
    "invalidate",
    "buffer_compress_percentage",
    "dedupe_percentage",
    "cpus_allowed",
    "cpus_allowed_policy",
    "iomem_align",
    "cmd_type",
];

/// fio's other spellings of the options above.
pub fn canonical(key: &str) -> &str {
    match key {
        "readwrite" => "rw",
        "blocksize" => "bs",
        "blocksize_range" => "bsrange",
        "ba" => "blockalign",
        "mem_align" => "iomem_align",
        k => k,
    }
}

/// Why sanbench cannot take some options, beyond "no such option".
pub fn why(key: &str) -> &'static str {
    match key {
        "thinktime" | "thinktime_blocks" | "thinktime_spin" => {
            "sanbench has no think time between I/Os"
        }
        "io_submit_mode" => "sanbench submits from its own streams (offload is not modeled)",
        "random_distribution" => "sanbench draws random offsets uniformly",
        "rate" | "rate_min" | "ratemin" => "sanbench paces I/Os per second only (rate_iops)",
        "nrfiles" | "filesize" | "opendir" => "sanbench takes its targets from filename",
        "zonemode" | "zonesize" | "zonerange" | "zoneskip" => "sanbench has no zoned access",
        "loops" | "number_ios" | "io_size" | "io_limit" => "sanbench runs for a time",
        "read_iolog" | "replay_no_stall" | "replay_time_scale" | "replay_redirect"
        | "replay_align" | "replay_scale" => {
            "a trace replay is not an access specification: `sanbench replay TRACE TARGET` \
             replays fio iologs and blktrace files, and a suite takes trace = \"FILE\" workloads"
        }
        _ => "sanbench has no such option",
    }
}
