//! Tests of precondition.rs.

use super::*;
use crate::engine::QueueConfig;
use crate::mem::MemTarget;
use crate::stamp::{Stamp, UNIT};

fn read_back(t: &dyn Target, len: usize) -> Vec<u8> {
    let arena = Arc::new(Arena::new(len));
    let mut q = t
        .open_queue(&QueueConfig {
            worker: 0,
            depth: 1,
            max_len: len as u32,
            arena: arena.clone(),
            io_timeout: Duration::from_secs(5),
            socket_ring: None,
        })
        .unwrap();
    let io = Io {
        fua: false,
        tag: 0,
        op: Op::Read,
        offset: 0,
        len: len as u32,
        buf: 0,
    };
    q.submit(&[io]).unwrap();
    let mut done = Vec::new();
    q.reap(1, &mut done).unwrap();
    assert_eq!(done[0].result, 0);
    // SAFETY: the read completed; nothing else uses the arena.
    unsafe { arena.slice(0, len) }.to_vec()
}

#[test]
fn modes_parse() {
    assert_eq!("auto".parse::<Mode>(), Ok(Mode::Auto));
    assert_eq!("none".parse::<Mode>(), Ok(Mode::None));
    assert_eq!("fill".parse::<Mode>(), Ok(Mode::Passes(1)));
    assert_eq!("3".parse::<Mode>(), Ok(Mode::Passes(3)));
    assert!("0".parse::<Mode>().is_err());
    assert!("often".parse::<Mode>().is_err());
    assert_eq!(Mode::Passes(1).to_string(), "fill");
}

#[test]
fn fill_stamps_every_unit_of_a_mem_target() {
    let t = MemTarget::new("mem:3M", 3 << 20).unwrap();
    let stop = AtomicBool::new(false);
    let mut calls = 0;
    let f = fill(
        &t,
        (3 << 20) - 4096,
        &FillPlan::fill(1),
        &DataSpec::default(),
        Duration::from_secs(5),
        &stop,
        None,
        &mut |d, total| {
            calls += 1;
            assert!(d <= total);
        },
    )
    .unwrap();
    assert_eq!(f.bytes, (3 << 20) - 4096);
    assert!(calls >= 1);
    let buf = read_back(&t, 3 << 20);
    for (i, u) in buf[..(3 << 20) - 4096].chunks(UNIT).enumerate() {
        let s = Stamp::decode(u).unwrap_or_else(|| panic!("unit {i} unstamped"));
        assert_eq!(s.offset, (i * UNIT) as u64);
    }
    // Past the span: untouched.
    assert!(buf[(3 << 20) - 4096..].iter().all(|&b| b == 0));
}

#[test]
fn auto_fills_only_what_sanbench_owns() {
    let mem = MemTarget::new("mem:1M", 1 << 20).unwrap();
    let stop = AtomicBool::new(false);
    let run = |t: &dyn Target, mode| {
        prepare(
            t,
            1 << 20,
            mode,
            FillPlan::fill(1),
            &DataSpec::default(),
            Duration::from_secs(5),
            &stop,
            None,
            &mut |_, _| {},
        )
        .unwrap()
    };
    let (rep, f) = run(&mem, Mode::Auto);
    assert_eq!(rep.state, SpanState::Preconditioned);
    assert!(f.is_some() && rep.bytes == 1 << 20);
    let (rep, f) = run(&mem, Mode::None);
    assert_eq!(rep.state, SpanState::Unknown);
    assert!(f.is_none() && !rep.preconditioned);

    // Someone else's NBD export: auto only checks.
    let mut info = mem.info().clone();
    info.engine = "nbd".into();
    info.params
        .insert("description".into(), "nbdkit memory plugin".into());
    assert_eq!(overwritable(&info), None);
    info.params
        .insert("description".into(), "sanbench RAM disk".into());
    assert!(overwritable(&info).is_some());
    info.engine = "iscsi".into();
    info.params.insert("vendor".into(), "LIO-ORG".into());
    assert_eq!(overwritable(&info), None);
    info.params.insert("vendor".into(), "SANBENCH".into());
    assert!(overwritable(&info).is_some());
    info.engine = "nvme".into();
    info.params.insert("model".into(), "Linux".into());
    assert_eq!(overwritable(&info), None);
    info.params.insert("model".into(), "SANBENCH".into());
    assert!(overwritable(&info).is_some());
    info.engine = "io_uring".into();
    assert_eq!(overwritable(&info), None);
    info.params.insert("created".into(), true.into());
    assert!(overwritable(&info).is_some());
}
