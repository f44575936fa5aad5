//! Watts Up? Pro wall meter on a serial port (the meter of the Third I/O study).
//!
//! Protocol (Watts Up? communications protocol, as used by the study): 115200 baud 8N1;
//! `#L,W,3,E,,1;` starts external logging every second; the meter then sends records
//! `#d,-,18,W,V,A,WH,Cost,WH/Mo,Cost/Mo,Wmax,Vmax,Amax,Wmin,Vmin,Amin,PF,DC,PC,HZ,VA;` where W and
//! V are in tenths (`1234` = 123.4 W). Records end with `;` (line ends vary), so the parser
//! splits on `;` and ignores whitespace.
//!
//! The port is opened non-blocking and drained at each `read()`: the meter pushes one record per
//! second whether we ask or not, and the sampler must never block on it.

use super::{PowerSource, Reading};
use crate::error::{MonitorError, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The command that starts logging to the serial port every second.
pub const START_LOGGING: &[u8] = b"#L,W,3,E,,1;";

/// One data record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WattsUpRecord {
    pub watts: f64,
    pub volts: f64,
}

/// Parses one `;`-terminated record (without the `;`). Non-data records (`#L`, replies) are
/// `None`.
pub fn parse_record(rec: &str) -> Option<WattsUpRecord> {
    let rec = rec.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    let rest = rec.strip_prefix("#d,")?;
    let mut f = rest.split(',');
    let _flag = f.next()?;
    let _count = f.next()?;
    let w: f64 = f.next()?.trim().parse().ok()?;
    let v: f64 = f.next()?.trim().parse().ok()?;
    Some(WattsUpRecord {
        watts: w / 10.0,
        volts: v / 10.0,
    })
}

/// Sets the port to 115200 baud, 8 data bits, no parity, 1 stop bit, raw, non-blocking reads.
fn configure(f: &File, path: &Path) -> Result<()> {
    let fd = f.as_raw_fd();
    // SAFETY: termios is plain old data; zeroed is a valid value that tcgetattr overwrites.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open descriptor owned by `f` for this whole call; `t` is a valid pointer.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(MonitorError::sys(
            format!("{} is not a serial port (tcgetattr)", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `t` is a valid termios obtained above; these functions only modify it.
    unsafe {
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, libc::B115200);
        libc::cfsetospeed(&mut t, libc::B115200);
    }
    t.c_cflag &= !(libc::PARENB | libc::CSTOPB | libc::CSIZE | libc::CRTSCTS);
    t.c_cflag |= libc::CS8 | libc::CLOCAL | libc::CREAD;
    t.c_cc[libc::VMIN] = 0;
    t.c_cc[libc::VTIME] = 0;
    // SAFETY: fd is open and `t` is a fully initialised termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(MonitorError::sys(
            format!("cannot configure {} (tcsetattr)", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[derive(Debug)]
pub struct WattsUpSource {
    path: PathBuf,
    port: File,
    pending: Vec<u8>,
    chunk: [u8; 512],
    last: Option<(Instant, WattsUpRecord)>,
    /// A meter that has said nothing for this long is treated as failed.
    silence: Duration,
}

impl WattsUpSource {
    /// Opens and configures the port, starts logging and waits up to `first_wait` for a record.
    pub fn open(path: &Path, first_wait: Duration) -> Result<WattsUpSource> {
        let port = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| MonitorError::read(path, e))?;
        configure(&port, path)?;
        let mut s = WattsUpSource {
            path: path.to_path_buf(),
            port,
            pending: Vec::with_capacity(1024),
            chunk: [0; 512],
            last: None,
            silence: Duration::from_secs(5),
        };
        s.port
            .write_all(START_LOGGING)
            .map_err(|e| MonitorError::sys(format!("write to {}", path.display()), e))?;
        let deadline = Instant::now() + first_wait;
        loop {
            s.drain()?;
            if s.last.is_some() {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                return Err(MonitorError::Unavailable(format!(
                    "no Watts Up? data record from {} within {:.1} s (meter off, wrong port, or \
                     another program logging)",
                    path.display(),
                    first_wait.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How long the meter may stay silent before reads fail (default 5 s; it sends every 1 s).
    pub fn with_silence(mut self, d: Duration) -> Self {
        self.silence = d;
        self
    }

    /// Reads whatever arrived and keeps the newest data record.
    fn drain(&mut self) -> Result<()> {
        loop {
            match self.port.read(&mut self.chunk) {
                Ok(0) => break,
                Ok(n) => self.pending.extend_from_slice(&self.chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(MonitorError::read(&self.path, e)),
            }
        }
        let now = Instant::now();
        while let Some(end) = self.pending.iter().position(|&b| b == b';') {
            if let Ok(rec) = std::str::from_utf8(&self.pending[..end]) {
                if let Some(r) = parse_record(rec) {
                    self.last = Some((now, r));
                }
            }
            self.pending.drain(..=end);
        }
        // A port spewing garbage without `;` must not grow the buffer without bound.
        if self.pending.len() > 4096 {
            self.pending.clear();
        }
        Ok(())
    }
}

impl PowerSource for WattsUpSource {
    fn name(&self) -> &str {
        "wattsup"
    }

    fn fast(&self) -> bool {
        true
    }

    fn read(&mut self) -> Result<Reading> {
        self.drain()?;
        match self.last {
            Some((t, r)) if t.elapsed() <= self.silence => Ok(Reading::Watts(r.watts)),
            Some((t, _)) => Err(MonitorError::Unavailable(format!(
                "Watts Up? meter on {} silent for {:.1} s",
                self.path.display(),
                t.elapsed().as_secs_f64()
            ))),
            None => Err(MonitorError::Unavailable("no Watts Up? record yet".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records() {
        let r = parse_record("\r\n#d,-,18,1234,1201,1030,5,_,_,_,_,_,_,_,_,_,_,_,_,_,_").unwrap();
        assert_eq!(r.watts, 123.4);
        assert_eq!(r.volts, 120.1);
        assert!(parse_record("#L,W,3,E,,1").is_none());
        assert!(parse_record("#d,-,18,x,1201").is_none());
        assert!(parse_record("#d,-").is_none());
    }
}
