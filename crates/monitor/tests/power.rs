//! Power sources end to end: the Watts Up? protocol through a pseudo-terminal, detection on a
//! host without meters, and the sampler's behaviour when a source fails.

use sanbench_monitor::power::{
    detect, open, ModelParams, PowerChoice, PowerOptions, PowerSource, Reading, WattsUpSource,
    START_LOGGING,
};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pty pair: (master for writing, master for reading, slave path). The slave fd stays open
/// (returned) so the pty survives while the source opens it by path.
fn pty() -> (File, File, File, PathBuf) {
    let (mut m, mut s) = (-1, -1);
    // SAFETY: out-pointers are valid; null name/termios/winsize are allowed by openpty.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: `s` is an open pty slave; buf is writable for its length.
    let rc = unsafe { libc::ttyname_r(s, buf.as_mut_ptr(), buf.len()) };
    assert_eq!(rc, 0);
    // SAFETY: ttyname_r wrote a NUL-terminated string into buf.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `m` is a fresh descriptor we own; dup gives a second one for the reader.
    let m2 = unsafe { libc::dup(m) };
    assert!(m2 >= 0);
    // SAFETY: each descriptor is owned by exactly one File from here on.
    unsafe {
        (
            File::from_raw_fd(m),
            File::from_raw_fd(m2),
            File::from_raw_fd(s),
            PathBuf::from(name),
        )
    }
}

#[test]
fn wattsup_through_a_pty() {
    let (mut w, mut r, _slave, path) = pty();
    let tenths = Arc::new(AtomicU32::new(1234));
    let run = Arc::new(AtomicBool::new(true));
    let (t2, r2) = (Arc::clone(&tenths), Arc::clone(&run));
    // The "meter": one record every 50 ms (the real one sends every second).
    let meter = std::thread::spawn(move || {
        while r2.load(Ordering::Relaxed) {
            let rec = format!(
                "#d,-,18,{},1201,1030,52,_,_,_,_,_,_,_,_,_,_,_,_,_,_;\r\n",
                t2.load(Ordering::Relaxed)
            );
            if w.write_all(rec.as_bytes()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // Silent after 1 s: twenty of the meter's records, a margin that holds on a loaded host.
    let silence = Duration::from_secs(1);
    let mut src = WattsUpSource::open(&path, Duration::from_secs(3))
        .unwrap()
        .with_silence(silence);
    assert_eq!(src.name(), "wattsup");
    assert_eq!(src.read().unwrap(), Reading::Watts(123.4));

    // The logging command reached the meter's side.
    // SAFETY: setting O_NONBLOCK on our own descriptor.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = r.as_raw_fd();
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
    }
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline
        && !seen
            .windows(START_LOGGING.len())
            .any(|x| x == START_LOGGING)
    {
        let mut b = [0u8; 256];
        match r.read(&mut b) {
            Ok(n) => seen.extend_from_slice(&b[..n]),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert!(
        seen.windows(START_LOGGING.len())
            .any(|x| x == START_LOGGING),
        "meter side saw {:?}",
        String::from_utf8_lossy(&seen)
    );

    // The load changes; the newest record wins. Waited for, not slept on: the meter's thread
    // may be late on a loaded host, and until its next record the reading is the old load.
    tenths.store(2000, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match src.read().unwrap() {
            Reading::Watts(200.0) => break,
            Reading::Watts(w) => assert_eq!(w, 123.4, "only the old or the new load"),
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the new load never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The meter goes quiet: an error that says so, not the last number forever. A record the
    // meter wrote before it stopped may still wait unread in the pty (the source stamps a
    // record when it reads it): until `silence` after the last one read, the last load.
    run.store(false, Ordering::Relaxed);
    meter.join().unwrap();
    let stopped = Instant::now();
    let e = loop {
        match src.read() {
            Ok(r) => assert_eq!(r, Reading::Watts(200.0), "the last load until silent"),
            Err(e) => break e,
        }
        assert!(
            stopped.elapsed() < silence + Duration::from_secs(10),
            "still a reading {:?} after the meter stopped",
            stopped.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(e.to_string().contains("silent"), "{e}");
}

#[test]
fn wattsup_on_something_that_is_not_a_serial_port() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let e = WattsUpSource::open(f.path(), Duration::from_millis(100)).unwrap_err();
    assert!(e.to_string().contains("not a serial port"), "{e}");
    let e =
        WattsUpSource::open(Path::new("/dev/ttyUSB-none"), Duration::from_millis(100)).unwrap_err();
    assert!(e.to_string().contains("/dev/ttyUSB-none"), "{e}");
}

fn host_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host")
}

fn opts() -> PowerOptions {
    PowerOptions {
        model: ModelParams::default_for_cpus(2),
        ..PowerOptions::for_host(&host_root())
    }
}

#[test]
fn detection_on_a_host_without_meters() {
    let st = detect(&host_root(), &opts());
    let by = |n: &str| st.iter().find(|s| s.name == n).unwrap().clone();
    let rapl = by("rapl");
    assert!(!rapl.available);
    assert!(rapl.detail.contains("no RAPL"), "{}", rapl.detail);
    let ipmi = by("ipmi-dcmi");
    assert!(!ipmi.available);
    assert!(ipmi.detail.contains("/dev/ipmi0"), "{}", ipmi.detail);
    assert!(!by("wattsup").available);
    assert!(!by("command").available);
    let model = by("model");
    assert!(model.available && model.modeled);
    assert!(model.detail.contains("24 W idle"), "{}", model.detail);

    // Auto falls back to the model and says why.
    let (src, why) = open(&host_root(), &PowerChoice::Auto, &opts()).unwrap();
    let src = src.unwrap();
    assert_eq!(src.name(), "model");
    assert!(src.modeled());
    assert_eq!(why.len(), 2);
    // Asking for RAPL explicitly on this host is an error with the reason.
    let e = open(&host_root(), &PowerChoice::Rapl, &opts()).unwrap_err();
    assert!(e.note().contains("no RAPL"));
    assert!(open(&host_root(), &PowerChoice::Off, &opts())
        .unwrap()
        .0
        .is_none());
}

#[test]
fn auto_prefers_a_given_meter_command() {
    let o = PowerOptions {
        power_cmd: Some("echo 150".into()),
        ..opts()
    };
    let (src, _) = open(&host_root(), &PowerChoice::Auto, &o).unwrap();
    let mut src = src.unwrap();
    assert_eq!(src.name(), "command");
    assert_eq!(src.read().unwrap(), Reading::Watts(150.0));
    let st = detect(&host_root(), &o);
    let c = st.iter().find(|s| s.name == "command").unwrap();
    assert!(c.available);
    assert_eq!(c.detail, "reading 150.0 W");
}
