//! `sanbench serve ...` as a child process of a test: started, its URI taken from the first
//! line it prints, its stderr collected, stopped by its process id.

use sanbench_stats::poison::lock;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A running `sanbench serve` (or any server that prints its URI on its first stdout line).
/// Killed (SIGKILL) when dropped; [`Served::interrupt`] stops it as a user would (SIGINT) and
/// checks that it exits cleanly.
pub struct Served {
    child: Child,
    /// The first word of the first line that contains "://".
    pub uri: String,
    /// The whole first line (the server's announcement).
    pub line: String,
    stderr: Arc<Mutex<String>>,
    drain: Option<JoinHandle<()>>,
}

impl Served {
    /// Runs `bin serve ARGS` and waits for its first line. stderr is drained by a thread (a
    /// server that logs per connection never blocks on a full pipe) and kept for
    /// [`Served::interrupt`] and [`Served::stderr`].
    pub fn start(bin: impl AsRef<OsStr>, args: &[&str]) -> Served {
        let mut child = Command::new(bin)
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sanbench serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        let drain = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]);
                lock(&sink).push_str(&text);
            }
        });
        let mut line = String::new();
        // The stdout pipe is read for its first line only; the reader is dropped afterwards,
        // which is fine for servers that print once.
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the server's first line");
        let uri = line
            .split_whitespace()
            .find(|w| w.contains("://"))
            .map(str::to_string);
        let mut s = Served {
            child,
            uri: String::new(),
            line,
            stderr,
            drain: Some(drain),
        };
        match uri {
            Some(u) => s.uri = u,
            None => {
                let err = s.stop_with(libc::SIGKILL).1;
                panic!(
                    "no URI in the server's first line {:?}; stderr: {err}",
                    s.line
                );
            }
        }
        s
    }

    /// `HOST:PORT` of the URI.
    pub fn addr(&self) -> &str {
        let rest = self.uri.split("://").nth(1).unwrap_or("");
        rest.split('/').next().unwrap_or(rest)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        lock(&self.stderr).clone()
    }

    /// Stops the server with SIGINT (as Ctrl-C would), asserts that it exits with success,
    /// and returns everything it wrote to stderr.
    pub fn interrupt(mut self) -> String {
        let (status, err) = self.stop_with(libc::SIGINT);
        assert!(status.success(), "server exited with {status}: {err}");
        err
    }

    /// Sends `sig` to the server (by its process id only), waits for it, and returns its exit
    /// status and stderr.
    fn stop_with(&mut self, sig: libc::c_int) -> (ExitStatus, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's process id, which stays ours until we wait for it.
        unsafe { libc::kill(pid, sig) };
        let status = self.child.wait().expect("wait for the server");
        if let Some(d) = self.drain.take() {
            let _ = d.join();
        }
        (status, self.stderr())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.drain.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if let Some(d) = self.drain.take() {
                let _ = d.join();
            }
        }
    }
}
