//! The running target's control socket (`serve nvme --control PATH`): a Unix stream socket
//! through which `sanbench ana --control PATH [PORT=STATE ...]` (and the lab) read and change
//! the ports' ANA states while hosts are connected.
//!
//! Why a socket and not a signal or a file watched: a change must be acknowledged (the caller
//! goes on to watch the hosts react), an unknown port must be refused to the one who asked,
//! and a socket file's permissions say who may ask (it is created 0600).
//!
//! The protocol is one request line and one reply per connection, text, so a shell with
//! `socat` can drive it too:
//! * request `ana` (the states) or `ana PORT=STATE ...` (set them, all or none);
//! * reply: one line per port, `PORT ADDRESS STATE` (after the change), or one line
//!   `error: WHY`.
//!
//! [`parse_request`] and [`parse_reply`] are sans-I/O and fuzzed (`nvme_ana_control`): the
//! socket is reachable by whoever may open the file, so requests are untrusted input.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::ana::AnaSetting;
use super::AnaControl;
use crate::wire::ana::AnaState;

/// The longest request line taken.
pub const MAX_REQUEST: usize = 4096;
/// The most settings one request carries (ports of one target are few).
pub const MAX_SETTINGS: usize = 256;
/// How long a client may take to send its line, and to take the reply.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// A request, typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Report the states.
    Get,
    /// Set these states (all or none), then report.
    Set(Vec<AnaSetting>),
}

/// `s` with control characters shown as `?`: an error quotes the request back on one line.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Types one request line (without its newline).
pub fn parse_request(line: &str) -> Result<Request, String> {
    if line.len() > MAX_REQUEST {
        return Err(format!("request longer than {MAX_REQUEST} bytes"));
    }
    let mut words = line.split_ascii_whitespace();
    match words.next() {
        Some("ana") => {}
        Some(w) => {
            let w: String = w.chars().take(32).collect();
            return Err(format!(
                "unknown request '{}' (ana [PORT=STATE ...])",
                printable(&w)
            ));
        }
        None => return Err("empty request (ana [PORT=STATE ...])".into()),
    }
    let settings = words
        .map(|w| w.parse::<AnaSetting>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| printable(&e))?;
    if settings.len() > MAX_SETTINGS {
        return Err(format!("more than {MAX_SETTINGS} settings in one request"));
    }
    Ok(if settings.is_empty() {
        Request::Get
    } else {
        Request::Set(settings)
    })
}

/// One port's line of a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortState {
    /// 1-based.
    pub index: usize,
    pub addr: SocketAddr,
    pub state: AnaState,
}

impl std::fmt::Display for PortState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.index, self.addr, self.state)
    }
}

/// The reply's text for these states.
pub fn format_reply(ports: &[PortState]) -> String {
    ports.iter().map(|p| format!("{p}\n")).collect()
}

/// Reads a reply: the ports' states, or the target's one-line refusal as the error.
pub fn parse_reply(text: &str) -> Result<Vec<PortState>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(why) = line.strip_prefix("error: ") {
            return Err(why.to_string());
        }
        let bad = || format!("unexpected reply line '{}'", printable(line));
        let mut w = line.split_ascii_whitespace();
        let (Some(i), Some(a), Some(s), None) = (w.next(), w.next(), w.next(), w.next()) else {
            return Err(bad());
        };
        out.push(PortState {
            index: i.parse().map_err(|_| bad())?,
            addr: a.parse().map_err(|_| bad())?,
            state: s.parse().map_err(|_| bad())?,
        });
    }
    if out.is_empty() {
        return Err("empty reply".into());
    }
    Ok(out)
}

/// What the server answers to one request line.
pub fn answer(ctl: &AnaControl, line: &str) -> String {
    let r = parse_request(line).and_then(|req| match req {
        Request::Get => Ok(ctl.states()),
        Request::Set(s) => ctl.set(&s).map(|()| ctl.states()),
    });
    match r {
        Ok(p) => format_reply(&p),
        Err(e) => format!("error: {}\n", e.replace('\n', " ")),
    }
}

/// Errors of the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("--control {path}: {reason}")]
    Bind { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The target's refusal (an unknown port), or a reply that made no sense.
    #[error("{1}: {0}")]
    Refused(String, PathBuf),
}

/// The control socket, served on a thread of its own until dropped (the socket file is
/// removed then).
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (a stale socket left by a dead server is replaced; any other file there
    /// is refused) and serves requests against `ctl`.
    pub fn start(path: &Path, ctl: AnaControl) -> Result<ControlServer, ControlError> {
        let bind_err = |reason: String| ControlError::Bind {
            path: path.to_path_buf(),
            reason,
        };
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_socket() {
                return Err(bind_err("exists and is not a socket".into()));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(bind_err("another server answers on it".into()));
            }
            std::fs::remove_file(path).map_err(|e| bind_err(e.to_string()))?;
        }
        let l = UnixListener::bind(path).map_err(|e| bind_err(e.to_string()))?;
        // Who may change the states: the owner (the socket's mode governs connect).
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        l.set_nonblocking(true)
            .map_err(|e| bind_err(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("nvme control".into())
            .spawn(move || serve(l, ctl, s2))
            .map_err(|e| bind_err(e.to_string()))?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(l: UnixListener, ctl: AnaControl, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                // One client at a time: requests are rare and short, and each is bounded by
                // IO_TIMEOUT.
                let _ = one(s, &ctl);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn one(s: UnixStream, ctl: &AnaControl) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut line = Vec::new();
    BufReader::new((&s).take(MAX_REQUEST as u64 + 1)).read_until(b'\n', &mut line)?;
    let reply = match std::str::from_utf8(&line) {
        Ok(t) => answer(ctl, t.trim_end_matches(['\n', '\r'])),
        Err(_) => "error: the request is not UTF-8\n".into(),
    };
    (&s).write_all(reply.as_bytes())
}

/// Sends one request line to the control socket at `path` and returns the ports' states (an
/// error the target answered is [`ControlError::Refused`]).
pub fn request(path: &Path, line: &str) -> Result<Vec<PortState>, ControlError> {
    let io_err = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut s = UnixStream::connect(path).map_err(io_err)?;
    s.set_read_timeout(Some(IO_TIMEOUT * 2)).map_err(io_err)?;
    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io_err)?;
    s.write_all(format!("{}\n", line.trim_end()).as_bytes())
        .map_err(io_err)?;
    let mut text = String::new();
    (&s).take(1 << 20)
        .read_to_string(&mut text)
        .map_err(io_err)?;
    parse_reply(&text).map_err(|e| ControlError::Refused(e, path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::ana::PortRef;

    #[test]
    fn requests() {
        assert_eq!(parse_request("ana"), Ok(Request::Get));
        assert_eq!(parse_request("  ana  "), Ok(Request::Get));
        let Ok(Request::Set(s)) = parse_request("ana 1=inaccessible 127.0.0.1:9=optimized") else {
            panic!()
        };
        assert_eq!(s[0].port, PortRef::Index(1));
        assert_eq!(s[1].state, AnaState::Optimized);
        for (bad, want) in [
            ("", "empty request"),
            ("set 1=optimized", "unknown request 'set'"),
            ("ana 1=blue", "ANA state 'blue'"),
            ("ana 1", "PORT=STATE"),
        ] {
            let e = parse_request(bad).unwrap_err();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
        assert!(parse_request(&"ana 1=optimized ".repeat(300))
            .unwrap_err()
            .contains("longer"));
    }

    #[test]
    fn replies_round_trip() {
        let ps = vec![
            PortState {
                index: 1,
                addr: "127.0.0.1:4420".parse().unwrap(),
                state: AnaState::Optimized,
            },
            PortState {
                index: 2,
                addr: "[::1]:4421".parse().unwrap(),
                state: AnaState::PersistentLoss,
            },
        ];
        assert_eq!(parse_reply(&format_reply(&ps)), Ok(ps));
        assert_eq!(
            parse_reply("error: unknown port 3 (ports: 1 a)\n"),
            Err("unknown port 3 (ports: 1 a)".into())
        );
        assert!(parse_reply("").is_err());
        assert!(parse_reply("1 2 3 4\n").is_err());
    }
}
