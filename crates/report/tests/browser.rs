//! The fixture's report.html in headless Chromium, driven over the DevTools protocol.
//!
//! Chromium is started with `--remote-debugging-pipe`: it reads NUL-terminated JSON commands on
//! fd 3 and writes replies and events on fd 4. That needs no WebSocket, no download and no
//! browser-automation crate, only Debian's `chromium` (scripts/deps.sh installs it for CI).
//! The test loads the page from a file:// URL, requires no console errors or exceptions, counts
//! the charts, moves the report card's weights and checks the ranking follows, and saves a
//! screenshot to `target/report-screenshot.png` for a person to look at.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use sanbench_report::{card, render_dir, Analysis, Options};
use sanbench_store::fixture::sample_comparison;

const CHROMIUM: &str = "/usr/bin/chromium";
const TIMEOUT: Duration = Duration::from_secs(60);

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, which we then own.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just created and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

struct Browser {
    child: Child,
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    /// Events seen while waiting for replies.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn launch() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w) = pipe(); // we write commands, Chromium reads fd 3
        let (ev_r, ev_w) = pipe(); // Chromium writes fd 4, we read
        let (in_fd, out_fd) = (cmd_r.as_raw_fd(), ev_w.as_raw_fd());
        let mut cmd = Command::new(CHROMIUM);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec. The pipe
        // ends are first moved above fd 10 so that placing them on 3 and 4 cannot clobber
        // each other; dup2 leaves the new descriptors without FD_CLOEXEC.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(in_fd, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(out_fd, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("start /usr/bin/chromium (scripts/deps.sh)");
        drop(cmd_r);
        drop(ev_w);
        let (tx, rx) = channel();
        let mut reader = File::from(ev_r);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = reader.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child,
            to_browser: File::from(cmd_w),
            from_browser: rx,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command (to a page when `session` is given) and waits for its reply.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from_browser
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to {method} within {TIMEOUT:?}"));
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method} failed: {}", v["error"]);
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    fn wait_event(&mut self, method: &str) {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            self.events.remove(i);
            return;
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from_browser
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {method} within {TIMEOUT:?}"));
            if v["method"] == method {
                return;
            }
            self.events.push(v);
        }
    }

    /// Evaluates an expression in the page and returns its value.
    fn eval(&mut self, session: &str, expr: &str) -> Value {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expr}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Console errors, uncaught exceptions and error log entries seen so far.
    fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| {
                e["method"] == "Runtime.exceptionThrown"
                    || (e["method"] == "Runtime.consoleAPICalled" && e["params"]["type"] == "error")
                    || (e["method"] == "Log.entryAdded" && e["params"]["entry"]["level"] == "error")
            })
            .map(|e| e.to_string())
            .collect()
    }

    /// A PNG of the page from `y` down `height` CSS pixels (the viewport when `None`).
    fn screenshot(&mut self, session: &str, y: f64, height: Option<f64>, path: &Path) {
        let mut params = json!({ "format": "png", "captureBeyondViewport": height.is_some() });
        if let Some(h) = height {
            params["clip"] = json!({ "x": 0, "y": y, "width": 1280, "height": h, "scale": 1 });
        }
        let r = self.call(Some(session), "Page.captureScreenshot", params);
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(path, png).unwrap();
    }

    fn close(mut self) {
        let _ = self.call(None, "Browser.close", json!({}));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

#[test]
fn report_page_in_headless_chromium() {
    let cmp = sample_comparison();
    let dir = tempfile::tempdir().unwrap();
    render_dir(&cmp, dir.path(), &Options::default()).unwrap();
    let page = dir.path().join("report.html");
    let expected_svgs = std::fs::read_to_string(&page)
        .unwrap()
        .matches("<svg")
        .count();

    let mut b = Browser::launch();
    let target = b.call(None, "Target.createTarget", json!({ "url": "about:blank" }));
    let target_id = target["targetId"].as_str().unwrap().to_string();
    let attached = b.call(
        None,
        "Target.attachToTarget",
        json!({ "targetId": target_id, "flatten": true }),
    );
    let s = attached["sessionId"].as_str().unwrap().to_string();
    for m in ["Runtime.enable", "Log.enable", "Page.enable"] {
        b.call(Some(&s), m, json!({}));
    }
    b.call(
        Some(&s),
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    );
    let url = format!("file://{}", page.display());
    b.call(Some(&s), "Page.navigate", json!({ "url": url }));
    b.wait_event("Page.loadEventFired");

    assert_eq!(
        b.eval(&s, "document.title"),
        json!("sanbench comparison: thirdio-2008")
    );
    let svgs = b.eval(&s, "document.querySelectorAll('svg').length");
    assert_eq!(svgs, json!(expected_svgs));
    assert!(expected_svgs >= 10);
    // Charts are laid out (a visible bar chart has a real size).
    let w = b.eval(
        &s,
        "document.querySelector('svg.bars').getBoundingClientRect().width",
    );
    assert!(w.as_f64().unwrap() > 300.0, "chart width {w}");
    let findings = b.eval(&s, "document.querySelectorAll('#key-findings li').length");
    assert!(findings.as_u64().unwrap() > 0);

    let order = "Array.from(document.querySelectorAll('#card-table tbody tr'))\
                 .map(function (tr) { return tr.getAttribute('data-target'); })";
    let an = Analysis::new(&cmp);
    let names =
        |c: card::Card| -> Value { json!(c.rows.iter().map(|r| &r.target).collect::<Vec<_>>()) };
    assert_eq!(
        b.eval(&s, order),
        names(card::card(&cmp, &an, &card::DEFAULT_WEIGHTS))
    );

    // Only latency counts: the page re-ranks and re-grades as Rust's card does.
    let set = |only: &str| {
        format!(
            "document.querySelectorAll('#report-card input[data-category]').forEach(function (i) {{\
               i.value = i.getAttribute('data-category') === '{only}' ? '100' : '0';\
               i.dispatchEvent(new Event('input', {{ bubbles: true }})); }}); true"
        )
    };
    b.eval(&s, &set("latency"));
    let latency_only = names(card::card(&cmp, &an, &[0.0, 0.0, 1.0, 0.0, 0.0]));
    assert_eq!(b.eval(&s, order), latency_only);
    let top = b.eval(
        &s,
        "document.querySelector('#card-table tbody tr .grade').textContent",
    );
    assert_eq!(top, json!("A"));
    b.eval(&s, &set("cpu_efficiency"));
    let cpu_only = names(card::card(&cmp, &an, &[0.0, 0.0, 0.0, 1.0, 0.0]));
    assert_eq!(b.eval(&s, order), cpu_only);
    assert_ne!(
        latency_only[0], cpu_only[0],
        "the fixture should make the ranking move"
    );
    assert_eq!(
        b.eval(
            &s,
            "document.getElementById('w-out-cpu_efficiency').textContent"
        ),
        json!("100")
    );

    // The time-series selector shows one workload's chart at a time.
    b.eval(
        &s,
        "var s = document.getElementById('ts-select'); s.value = 'db-8k-qd16';\
         s.dispatchEvent(new Event('change')); true",
    );
    let shown = b.eval(
        &s,
        "Array.from(document.querySelectorAll('.ts-chart')).filter(function (d) { return !d.hidden; })\
         .map(function (d) { return d.getAttribute('data-workload'); })",
    );
    assert_eq!(shown, json!(["db-8k-qd16"]));

    // Back to the default weights for the picture.
    b.call(Some(&s), "Page.reload", json!({}));
    b.wait_event("Page.loadEventFired");
    let errors = b.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    let out = target_dir();
    std::fs::create_dir_all(&out).unwrap();
    let height = b.eval(&s, "document.documentElement.scrollHeight");
    b.screenshot(&s, 0.0, height.as_f64(), &out.join("report-screenshot.png"));
    b.screenshot(&s, 0.0, None, &out.join("report-screenshot-top.png"));
    // Section by section at full size, for a person reviewing the page's look.
    if std::env::var_os("SANBENCH_SECTION_SHOTS").is_some() {
        for id in [
            "report-card",
            "charts",
            "latency",
            "qd-scaling",
            "results",
            "environment",
        ] {
            let y = b.eval(
                &s,
                &format!("document.getElementById('{id}').offsetTop - 60"),
            );
            let path = out.join(format!("report-screenshot-{id}.png"));
            b.screenshot(&s, y.as_f64().unwrap_or(0.0), Some(1100.0), &path);
        }
    }
    b.close();
}
