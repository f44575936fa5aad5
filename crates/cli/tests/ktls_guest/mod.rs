//! Kernel TLS for NBD over TLS, checked in vm_nvme's guest (whose kernel has the `tls`
//! module; the host running the tests may not: there every connection falls back to user
//! space, which the nbd_tls_* tests cover). `sanbench serve nbd --tls` and `sanbench run
//! --verify` over certificates in the four pairings: kernel records on both sides, a kernel
//! client against a user-space (rustls) server and the reverse (the interop check between
//! the kernel's record layer and rustls), and user space on both sides as the control; then
//! the kernel client against rustls with TLS 1.2 AES-128-GCM and with TLS 1.3 ChaCha20-Poly1305
//! (the client's `SANBENCH_TLS_SUITES`; the default is TLS 1.3 AES-256-GCM), and kernel on both
//! sides with the client's io_uring socket layer (`?sockio=uring`). The
//! result must name who made the records, and the guest's /proc/net/tls_stat must count
//! kernel sessions for every pairing with a kernel side and none for the control.
//! The part of the guest's script is [`script`], its files [`files`], the checks of what it
//! printed [`check`]: one boot serves vm_nvme's checks and these.

/// The modules the guest loads: the tls module and the AEADs it asks the crypto API for
/// (AES itself is built into Debian's kernel; aesni needs a CPU flag TCG's default CPU lacks).
pub const MODULES: &[&str] = &[
    "tls",
    "ctr",
    "ghash_generic",
    "gcm",
    "chacha_generic",
    "poly1305_generic",
    "chacha20poly1305",
];

/// The certificates the guest's servers and clients use: (path in the guest, contents). The
/// directory made for them can go once they are read.
pub fn files() -> Vec<(&'static str, Vec<u8>)> {
    let pki = crate::tls::pki("sanbench-ktls-ca");
    let read = |f: &str| std::fs::read(pki.path().join(f)).unwrap();
    vec![
        ("/pki/ca-cert.pem", read("ca-cert.pem")),
        ("/pki/server-cert.pem", read("server-cert.pem")),
        ("/pki/server-key.pem", read("server-key.pem")),
    ]
}

/// The guest's part, run by the sanbench at `sb` (servers on the guest's own 127.0.0.1): each
/// pairing is a server (kernel records or --ktls off) and a client URI (?ktls=off or not); a
/// short verified run, its exit code, what its result says of the records, and the kernel's
/// count of TLS sessions after it.
pub fn script(sb: &str) -> String {
    format!(
        r#"
S={sb}
stat() {{ grep "^$1" /proc/net/tls_stat | awk '{{print $2}}'; }}
echo "TLSSTAT=$([ -e /proc/net/tls_stat ] && echo yes || echo no)"
$S serve nbd --size 4M --listen 127.0.0.1:10809 --tls-certificates /pki > /tmp/k.log 2>&1 &
K=$!
$S serve nbd --size 4M --listen 127.0.0.1:10810 --tls-certificates /pki --ktls off > /tmp/u.log 2>&1 &
U=$!
for i in $(seq 1 100); do [ -s /tmp/k.log ] && [ -s /tmp/u.log ] && break; sleep 0.1; done
echo "SERVE_K=$(head -1 /tmp/k.log)"
echo "SERVE_U=$(head -1 /tmp/u.log)"
pair() {{
  $S run "nbds://127.0.0.1:$2/?tls-certificates=/pki$3" --read 50 --random 100 --bs 64k \
    --qd 4 --time 500ms --ramp 0 --quiet --verify --no-monitor --json /tmp/$1.json > /tmp/$1.out 2>&1
  echo "RC_$1=$?"
  echo "REC_$1=$(grep -o '"tls_records": *"[^"]*"' /tmp/$1.json | head -1)"
  echo "QREC_$1=$(grep -o '"nbd_tls_records": *"[^"]*"' /tmp/$1.json | sort -u | tr '\n' ' ')"
  echo "DESC_$1=$(grep -o '"tls": *"[^"]*"' /tmp/$1.json | head -1)"
  echo "TX_$1=$(stat TlsTxSw)"
  echo "RX_$1=$(stat TlsRxSw)"
  echo "DECERR_$1=$(stat TlsDecryptError)"
  echo "AT_$1=$(cut -d' ' -f1 /proc/uptime)"
  [ -s /tmp/$1.out ] && sed "s/^/OUT_$1: /" /tmp/$1.out | head -5
}}
echo "TX_start=$(stat TlsTxSw)"
echo "AT_start=$(cut -d' ' -f1 /proc/uptime)"
pair uu 10810 "&ktls=off"
pair kk 10809 ""
pair ku 10810 ""
pair uk 10809 "&ktls=off"
SANBENCH_TLS_SUITES=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 pair ku12 10810 ""
SANBENCH_TLS_SUITES=TLS13_CHACHA20_POLY1305_SHA256 pair kuC 10810 ""
pair kkR 10809 "&sockio=uring"
echo "SOCK_kkR=$(grep -o '"nbd_socket": *"[^"]*"' /tmp/kkR.json | sort -u | tr '\n' ' ')"
echo "SOCKFB_kkR=$(grep -o '"socket_fallback": *"[^"]*"' /tmp/kkR.json | head -1)"
kill -INT $K $U
wait $K $U
echo "STOP_K=$(tail -1 /tmp/k.log)"
echo "STOP_U=$(tail -1 /tmp/u.log)"
cat /proc/net/tls_stat
"#
    )
}

/// The value after `key=` on the console, up to the end of its line.
fn value<'a>(console: &'a str, key: &str) -> &'a str {
    let tag = format!("{key}=");
    console
        .lines()
        .find_map(|l| l.trim_end_matches('\r').strip_prefix(tag.as_str()))
        .unwrap_or("")
}

/// What the guest printed of the pairings, checked.
pub fn check(c: &str) {
    // What each pairing said, for `--nocapture`.
    for l in c.lines().filter(|l| l.contains('=') && !l.starts_with('[')) {
        println!("{l}");
    }
    let v = |key: &str| value(c, key).to_string();
    let num = |key: &str| -> u64 {
        v(key)
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{key} is not a number; console:\n{c}"))
    };
    assert_eq!(v("TLSSTAT"), "yes", "no tls module in the guest:\n{c}");
    assert!(
        v("SERVE_K").contains("TLS records by the kernel"),
        "{}\n{c}",
        v("SERVE_K")
    );
    assert!(
        v("SERVE_U").contains("TLS records in user space (--ktls off)"),
        "{c}"
    );
    // Every pairing verified its data (exit 0; 3 would be a mismatch).
    for p in ["uu", "kk", "ku", "uk"] {
        assert_eq!(v(&format!("RC_{p}")), "0", "pairing {p}:\n{c}");
        assert!(
            v(&format!("DESC_{p}")).contains("TLSv1_3"),
            "pairing {p}:\n{c}"
        );
    }
    // The client's result says who made its records.
    for (p, want) in [
        ("kk", "\"kernel\""),
        ("ku", "\"kernel\""),
        ("uu", "\"user (ktls=off)\""),
        ("uk", "\"user (ktls=off)\""),
    ] {
        assert!(v(&format!("REC_{p}")).ends_with(want), "pairing {p}:\n{c}");
    }
    assert!(v("QREC_kk").contains("\"kernel\""), "{c}");
    assert!(!v("QREC_kk").contains("\"user\""), "{c}");
    assert!(v("QREC_uu").contains("\"user\""), "{c}");
    // The kernel's own count of TLS sessions set up: none for the control, some for every
    // pairing with a kernel side (the client's, the server's, or both).
    let tx = |p: &str| num(&format!("TX_{p}"));
    assert_eq!(tx("uu"), num("TX_start"), "user space on both sides:\n{c}");
    assert!(tx("kk") > tx("uu"), "kernel on both sides:\n{c}");
    assert!(
        tx("ku") > tx("kk"),
        "kernel client, user-space server:\n{c}"
    );
    assert!(
        tx("uk") > tx("ku"),
        "user-space client, kernel server:\n{c}"
    );
    assert_eq!(
        num("RX_uk"),
        num("TX_uk"),
        "both directions of every session:\n{c}"
    );
    assert_eq!(
        num("DECERR_uk"),
        0,
        "records the kernel could not open:\n{c}"
    );
    // TLS 1.2 (AES-128-GCM, explicit nonces) and ChaCha20-Poly1305 (TLS 1.3), chosen by the
    // client, between the kernel's records and rustls's.
    for (p, suite) in [
        ("ku12", "TLSv1_2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
        ("kuC", "TLSv1_3 TLS13_CHACHA20_POLY1305_SHA256"),
    ] {
        assert_eq!(v(&format!("RC_{p}")), "0", "pairing {p}:\n{c}");
        assert!(v(&format!("DESC_{p}")).contains(suite), "pairing {p}:\n{c}");
        assert!(
            v(&format!("REC_{p}")).ends_with("\"kernel\""),
            "pairing {p}:\n{c}"
        );
    }
    assert!(tx("kuC") > tx("ku12") && tx("ku12") > tx("uk"), "{c}");
    assert_eq!(num("DECERR_kuC"), 0, "{c}");
    // Over kernel TLS the socket carries plaintext: the io_uring socket layer runs on it.
    assert_eq!(v("RC_kkR"), "0", "{c}");
    assert!(v("REC_kkR").ends_with("\"kernel\""), "{c}");
    assert!(v("SOCK_kkR").contains("\"uring\""), "{c}");
    assert!(!v("SOCK_kkR").contains("\"poll\""), "{c}");
    // The kernel server counted its connections: the probe and the queue's of kk and uk.
    assert!(v("STOP_K").contains("with kernel TLS records"), "{c}");
    assert!(!v("STOP_U").contains("kernel TLS"), "{c}");
}
