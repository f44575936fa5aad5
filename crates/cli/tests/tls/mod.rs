//! Helpers of the NBD-over-TLS interop tests: credentials made with the openssl command-line
//! tool, and `sanbench serve nbd` as a child process stopped by its process id.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sanbench_testkit::Served;

pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

fn openssl(dir: &Path, args: &[&str]) {
    sanbench_testkit::require("openssl", "openssl");
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate directory in nbdkit's and libnbd's layout: ca-cert.pem, server-cert.pem,
/// server-key.pem, client-cert.pem, client-key.pem; the server's certificate names localhost
/// and 127.0.0.1. `cn` tells CAs apart (a second PKI must not verify the first's server).
pub fn pki(cn: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca_subj = format!("/CN={cn}");
    let mut a = vec!["req", "-x509"];
    a.extend(ec);
    a.extend([
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca-cert.pem",
        "-days",
        "2",
        "-subj",
        &ca_subj,
    ]);
    openssl(d, &a);
    for (who, usage, subj) in [
        ("server", "serverAuth", "/CN=localhost"),
        ("client", "clientAuth", "/CN=sanbench-client"),
    ] {
        let ext = format!(
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage={usage}\n\
             basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        );
        std::fs::write(d.join(format!("{who}.ext")), ext).unwrap();
        let (key, csr, cert) = (
            format!("{who}-key.pem"),
            format!("{who}.csr"),
            format!("{who}-cert.pem"),
        );
        let mut a = vec!["req"];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &csr, "-subj", subj]);
        openssl(d, &a);
        let extfile = format!("{who}.ext");
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca-cert.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "2",
                "-extfile",
                &extfile,
            ],
        );
    }
    t
}

/// Writes `pki`'s ca-crl.pem (nbdkit's, qemu's and libnbd's optional revocation list), signed
/// by its CA, revoking `who`'s certificates ("client", "server"; none: an empty list).
pub fn crl(pki: &Path, who: &[&str]) {
    let cnf = "[ca]\ndefault_ca = c\n[c]\ndatabase = index.txt\ncrlnumber = crlnumber\n\
               default_md = sha256\ndefault_crl_days = 2\n";
    std::fs::write(pki.join("ca.cnf"), cnf).unwrap();
    std::fs::write(pki.join("index.txt"), "").unwrap();
    std::fs::write(pki.join("crlnumber"), "01\n").unwrap();
    let ca = [
        "-config",
        "ca.cnf",
        "-keyfile",
        "ca-key.pem",
        "-cert",
        "ca-cert.pem",
    ];
    for w in who {
        let cert = format!("{w}-cert.pem");
        let mut a = vec!["ca"];
        a.extend(ca);
        a.extend(["-revoke", &cert]);
        openssl(pki, &a);
    }
    let mut a = vec!["ca"];
    a.extend(ca);
    a.extend(["-gencrl", "-out", "ca-crl.pem"]);
    openssl(pki, &a);
}

/// A client's directory with `pki`'s ca-cert.pem (it trusts the server) and no client
/// certificate.
pub fn ca_only(pki: &Path) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), t.path().join("ca-cert.pem")).unwrap();
    t
}

/// A client's directory that trusts `pki`'s server but whose client certificate and key come
/// from `foreign` (a PKI with another CA).
pub fn foreign_client(pki: &Path, foreign: &Path) -> tempfile::TempDir {
    let t = ca_only(pki);
    for f in ["client-cert.pem", "client-key.pem"] {
        std::fs::copy(foreign.join(f), t.path().join(f)).unwrap();
    }
    t
}

/// A psktool-format key file with one identity.
pub fn psk_file(dir: &Path, name: &str, user: &str, key_hex: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{user}:{key_hex}\n")).unwrap();
    p
}

/// `sanbench serve nbd` on a kernel-chosen loopback port (testkit's `Served`, killed by pid
/// when dropped), with the address its first line names.
pub struct Serve {
    inner: Served,
    pub addr: String,
    pub line: String,
}

impl Serve {
    pub fn start(size: &str, args: &[&str]) -> Serve {
        let mut all = vec!["nbd", "--size", size, "--listen", "127.0.0.1:0"];
        all.extend(args);
        let inner = Served::start(bin(), &all);
        Serve {
            addr: inner.addr().to_string(),
            line: inner.line.clone(),
            inner,
        }
    }

    pub fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    /// Stops the server (SIGINT by pid), checks that it exits cleanly, and returns what it
    /// wrote to stderr.
    pub fn stop(self) -> String {
        self.inner.interrupt()
    }
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run command")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sanbench run` of a short write-then-read workload with verification: the data written
/// over TLS reads back equal (any difference exits 3).
pub fn sanbench_verify_run(uri: &str) -> Output {
    run(Command::new(bin())
        .args(["run", uri, "--read", "50", "--random", "100", "--bs", "64k"])
        .args([
            "--qd", "8", "--time", "1s", "--ramp", "0", "--quiet", "--verify",
        ])
        .args(["--no-monitor", "--json", "-"]))
}

/// A sanbench process that must end on its own within 60 s (no hang on any error path).
pub fn sanbench_bounded(args: &[&str]) -> Output {
    run(Command::new("timeout").arg("60").arg(bin()).args(args))
}

/// A peer NBD server process on a free loopback port, ready once it greets; killed by its
/// process id and reaped on drop.
pub struct Peer {
    child: Child,
    pub port: u16,
}

impl Peer {
    pub fn start(program: &str, package: &str, args: &[String], port: u16) -> Peer {
        sanbench_testkit::require(program, package);
        let child = sanbench_testkit::spawn_nbd_peer(Command::new(program).args(args), port);
        Peer { child, port }
    }

    /// `nbdkit memory 64M` on a unix socket, ready once it greets there.
    pub fn nbdkit_unix(sock: &Path, flags: &[String]) -> Peer {
        sanbench_testkit::require("nbdkit", "nbdkit");
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(sock)
            .args(flags)
            .args(["memory", "64M"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start nbdkit");
        let mut peer = Peer { child, port: 0 };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let mut magic = [0u8; 8];
            let greeted = std::os::unix::net::UnixStream::connect(sock).is_ok_and(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(1))).is_ok()
                    && s.read_exact(&mut magic).is_ok()
            });
            if greeted && &magic == b"NBDMAGIC" {
                return peer;
            }
            if let Ok(Some(st)) = peer.child.try_wait() {
                panic!("nbdkit exited early: {st}");
            }
            assert!(
                Instant::now() < deadline,
                "nbdkit did not greet on {sock:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `nbdkit memory SIZE` with extra flags (`--tls=require`, `--tls-certificates=DIR`).
    pub fn nbdkit(flags: &[String]) -> Peer {
        let port = sanbench_testkit::free_port();
        let mut a: Vec<String> = ["-f", "-i", "127.0.0.1", "-p", &port.to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(flags.iter().cloned());
        a.extend(["memory".to_string(), "64M".to_string()]);
        Peer::start("nbdkit", "nbdkit", &a, port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `tls` parameter sanbench's result reports for its first target.
pub fn result_tls(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("result JSON: {e}: {}", stderr(out)));
    v["results"][0]["info"]["params"]["tls"].to_string()
}

/// Who made the records, as the result's parameters say (`tls_records`).
pub fn result_records(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("result JSON: {e}: {}", stderr(out)));
    v["results"][0]["info"]["params"]["tls_records"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What this host's kernel makes of TLS records: `kernel` with the tls module, else
/// `user (REASON)`.
pub fn host_records() -> String {
    if std::path::Path::new("/proc/net/tls_stat").exists() {
        "kernel".into()
    } else {
        "user (the tls module is not loaded: modprobe tls)".into()
    }
}
