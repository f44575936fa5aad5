//! The Linux kernel as a peer: Debian's kernel booted with QEMU TCG and a busybox initramfs
//! this module builds (the recipe of ../shared/PEERS.md, "The Linux kernel as a peer"). The
//! guest runs a shell script of the test's; its serial console is collected so the test can
//! wait for markers the script prints. Traffic stays on this machine: the user-mode network
//! has `restrict=on`, forwards listen on 127.0.0.1 only, and the guest reaches the host only
//! through `guestfwd` entries (a socat that QEMU spawns per connection dials 127.0.0.1).
//!
//! Needs the Debian packages qemu-system-x86, busybox-static and linux-image-amd64
//! (scripts/deps.sh). TCG is slow: nothing measured inside is a performance figure.

use sanbench_stats::poison::lock;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The newest kernel under /boot with its modules: (version, vmlinuz path).
pub fn kernel() -> (String, PathBuf) {
    crate::require("qemu-system-x86_64", "qemu-system-x86");
    crate::require("busybox", "busybox-static");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir("/boot")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let v = name.strip_prefix("vmlinuz-")?.to_string();
                    Path::new("/lib/modules")
                        .join(&v)
                        .is_dir()
                        .then(|| (v, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!("no /boot/vmlinuz-* with modules: install the Debian package linux-image-amd64")
    })
}

/// kmod's modinfo: by path where it is (a PATH without the sbin directories, a plain user's,
/// found no modinfo and silently left every module out of the guest).
fn modinfo_bin() -> &'static str {
    [
        "/usr/sbin/modinfo",
        "/sbin/modinfo",
        "/usr/bin/modinfo",
        "/bin/modinfo",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap_or("modinfo")
}

fn modinfo(k: &str, field: Option<&str>, name: &str) -> Option<String> {
    let mut c = Command::new(modinfo_bin());
    c.args(["-k", k]);
    match field {
        Some(f) => c.args(["-F", f]),
        None => c.arg("-n"),
    };
    let out = c.arg(name).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `names` and everything they depend on, dependencies first, as (name, file) pairs; names the
/// kernel does not have (built in, or gone in this version) are left out.
pub fn modules_with_deps(k: &str, names: &[&str]) -> Vec<(String, PathBuf)> {
    fn visit(k: &str, n: &str, seen: &mut Vec<String>, out: &mut Vec<(String, PathBuf)>) {
        let n = n.replace('-', "_");
        if seen.contains(&n) {
            return;
        }
        seen.push(n.clone());
        let Some(path) = modinfo(k, None, &n).filter(|p| p.starts_with('/')) else {
            return;
        };
        for d in modinfo(k, Some("depends"), &n)
            .unwrap_or_default()
            .split(',')
        {
            if !d.is_empty() {
                visit(k, d, seen, out);
            }
        }
        out.push((n, PathBuf::from(path)));
    }
    let (mut seen, mut out) = (Vec::new(), Vec::new());
    for n in names {
        visit(k, n, &mut seen, &mut out);
    }
    out
}

/// A module file's bytes, decompressed (busybox insmod takes plain .ko files).
fn module_bytes(p: &Path) -> Vec<u8> {
    let s = p.to_string_lossy();
    let tool = if s.ends_with(".xz") {
        Some("xz")
    } else if s.ends_with(".zst") {
        Some("zstd")
    } else if s.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    match tool {
        None => std::fs::read(p).unwrap(),
        Some(t) => {
            let out = Command::new(t).args(["-dc"]).arg(p).output().unwrap();
            assert!(out.status.success(), "{t} -dc {s} failed");
            out.stdout
        }
    }
}

/// An uncompressed cpio "newc" archive (the kernel unpacks it as the initramfs).
struct Cpio(Vec<u8>, u32);

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.1 += 1;
        let h = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.1,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.0.extend_from_slice(h.as_bytes());
        self.0.extend_from_slice(name.as_bytes());
        self.0.push(0);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
        self.0.extend_from_slice(data);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }
    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }
    fn file(&mut self, name: &str, data: &[u8], exec: bool) {
        self.entry(name, if exec { 0o100755 } else { 0o100644 }, data);
    }
    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.0
    }
}

/// The modules every guest loads: the virtio network.
pub const NET_MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
];

/// Writes an initramfs for kernel `k` to `path`: busybox, the modules (with their
/// dependencies, loaded in order with `params`), and an /init that sets up the network
/// (10.0.2.15/24), runs `script`, then powers off.
pub fn build_initramfs(
    path: &Path,
    k: &str,
    modules: &[&str],
    params: &[(&str, &str)],
    script: &str,
) {
    build_initramfs_with(path, k, modules, params, script, &[], &[]);
}

/// The shared libraries a dynamically linked program loads, the loader included, as `ldd`
/// lists them (absolute paths).
fn libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let p = match l.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

/// [`build_initramfs`] with programs of the host: each of `bins` (absolute paths) goes in at
/// its own path with the libraries `ldd` lists for it, so a dynamically linked tool (nbd-client,
/// iscsiadm) runs in the guest; `files` are (path in the guest, contents).
pub fn build_initramfs_with(
    path: &Path,
    k: &str,
    modules: &[&str],
    params: &[(&str, &str)],
    script: &str,
    bins: &[&str],
    files: &[(&str, &[u8])],
) {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox: install the Debian package busybox-static");
    let mut c = Cpio(Vec::new(), 0);
    for d in [
        "bin", "sbin", "dev", "proc", "sys", "tmp", "lib", "lib/mods",
    ] {
        c.dir(d);
    }
    c.file("bin/busybox", &std::fs::read(busybox).unwrap(), true);
    let mut extra: Vec<(PathBuf, bool)> = Vec::new();
    for b in bins {
        let p = PathBuf::from(b);
        assert!(p.is_file(), "{b}: not installed (scripts/deps.sh)");
        for l in libraries(&p) {
            if !extra.iter().any(|(e, _)| *e == l) {
                extra.push((l, true));
            }
        }
        extra.push((p, true));
    }
    let mut dirs: Vec<String> = [
        "bin", "sbin", "dev", "proc", "sys", "tmp", "lib", "lib/mods",
    ]
    .iter()
    .map(|d| d.to_string())
    .collect();
    let mut add = |c: &mut Cpio, name: &str, data: &[u8], exec: bool| {
        let mut at = String::new();
        for part in Path::new(name).parent().into_iter().flat_map(|p| p.iter()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(&part.to_string_lossy());
            if !dirs.contains(&at) {
                c.dir(&at);
                dirs.push(at.clone());
            }
        }
        c.file(name, data, exec);
    };
    for (p, exec) in &extra {
        let name = p.to_string_lossy().trim_start_matches('/').to_string();
        add(&mut c, &name, &std::fs::read(p).unwrap(), *exec);
    }
    for (name, data) in files {
        add(&mut c, name.trim_start_matches('/'), data, false);
    }
    let mut all: Vec<&str> = NET_MODULES.to_vec();
    all.extend_from_slice(modules);
    let mut load = String::new();
    for (i, (name, p)) in modules_with_deps(k, &all).iter().enumerate() {
        let file = format!("lib/mods/{i:03}-{name}.ko");
        c.file(&file, &module_bytes(p), false);
        let args = params
            .iter()
            .find(|(m, _)| m.replace('-', "_") == *name)
            .map_or("", |(_, a)| a);
        load.push_str(&format!(
            "insmod /{file} {args} || echo \"insmod {name} failed\"\n"
        ));
    }
    let init = format!(
        "#!/bin/busybox sh\n/bin/busybox --install -s /bin\nexport PATH=/bin\n\
         mount -t proc proc /proc\nmount -t sysfs sysfs /sys\nmount -t devtmpfs dev /dev\n\
         {load}ip link set lo up\nip link set eth0 up\nip addr add 10.0.2.15/24 dev eth0\n\
         ip route add default via 10.0.2.2\necho SANBENCH-VM-UP\n{script}\n\
         echo SANBENCH-VM-DONE\nsync\npoweroff -f\n"
    );
    c.file("init", init.as_bytes(), true);
    std::fs::write(path, c.finish()).unwrap();
}

/// Moves the complete UTF-8 of `pending` to `out`, keeping an incomplete character at its end
/// for the next read: the serial console arrives a few bytes at a time, and a character split
/// across two reads must not turn into two replacement characters.
fn drain_utf8(pending: &mut Vec<u8>, out: &mut String) {
    loop {
        match std::str::from_utf8(pending) {
            Ok(s) => {
                out.push_str(s);
                pending.clear();
                return;
            }
            Err(e) => {
                let ok = e.valid_up_to();
                out.push_str(std::str::from_utf8(&pending[..ok]).unwrap_or_default());
                match e.error_len() {
                    None => {
                        pending.drain(..ok);
                        return;
                    }
                    Some(bad) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        pending.drain(..ok + bad);
                    }
                }
            }
        }
    }
}

/// QEMU arguments for an emulated NVMe controller (`-device nvme`) whose one namespace is
/// the raw file `image`: the guest sees `/dev/nvme0n1` and its generic device `/dev/ng0n1`.
pub fn nvme_drive(image: &Path, serial: &str) -> Vec<String> {
    vec![
        "-drive".into(),
        // discard=unmap: QEMU's controller reports that deallocated blocks read as zeros
        // (DLFEAT), which holds only when it passes the deallocation on to the file (with
        // QEMU's default, discard=ignore, the old data stays and --verify rightly finds it).
        format!(
            "file={},if=none,id=nvm-{serial},format=raw,discard=unmap",
            image.display()
        ),
        "-device".into(),
        format!("nvme,serial={serial},drive=nvm-{serial}"),
    ]
}

/// The kernel image QEMU boots: the uncompressed `vmlinux` inside `vmlinuz`, entered through
/// its PVH note, where the kernel has one (CONFIG_PVH) and the payload can be taken out (xz or
/// zstd, by the host's own tools); else `vmlinuz` itself. Under TCG a bzImage spends most of
/// the time before its first line decompressing itself: 13-22 s on a loaded 2-core host,
/// against 3 s for the same kernel booted uncompressed. Extracted once per host into the
/// temporary directory (by kernel version), shared by every guest test.
pub fn boot_image(vmlinuz: &Path) -> PathBuf {
    extract_vmlinux(vmlinuz).unwrap_or_else(|| vmlinuz.to_path_buf())
}

fn extract_vmlinux(vmlinuz: &Path) -> Option<PathBuf> {
    let name = vmlinuz.file_name()?.to_str()?;
    let version = name.strip_prefix("vmlinuz-")?;
    let config = std::fs::read_to_string(format!("/boot/config-{version}")).ok()?;
    if !config.lines().any(|l| l == "CONFIG_PVH=y") {
        return None;
    }
    let out = std::env::temp_dir().join(format!("sanbench-vmlinux-{version}"));
    if std::fs::metadata(&out).is_ok_and(|m| m.len() > 0) {
        return Some(out);
    }
    let image = std::fs::read(vmlinuz).ok()?;
    let find = |magic: &[u8]| image.windows(magic.len()).position(|w| w == magic);
    let (start, tool) = if let Some(i) = find(b"\xfd7zXZ\x00") {
        (i, ["xz", "-dc", "--single-stream"])
    } else if let Some(i) = find(&[0x28, 0xb5, 0x2f, 0xfd]) {
        (i, ["zstd", "-dcq", "--no-progress"])
    } else {
        return None;
    };
    let mut child = Command::new(tool[0])
        .args(&tool[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let payload = image[start..].to_vec();
    let feeder = std::thread::spawn(move || {
        // The payload is followed by the rest of the bzImage: the tool stops at the stream's
        // end, and its closing the pipe early is not an error here.
        let _ = std::io::Write::write_all(&mut stdin, &payload);
    });
    let done = child.wait_with_output().ok()?;
    let _ = feeder.join();
    let elf = done.stdout;
    if elf.len() < 1 << 20 || &elf[..4] != b"\x7fELF" {
        return None;
    }
    // Written beside, then renamed: tests running at once never read half a file. The name
    // is the process's and the thread's: two guest tests of one binary start together.
    let tmp = out.with_extension(format!(
        "{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, &elf).ok()?;
    std::fs::rename(&tmp, &out).ok()?;
    Some(out)
}

/// `bin` (the test's sanbench) copied to `dir`/sanbench without its debug info, the copy that
/// goes into the guest: the test build carries ~100 MB of it. Needs strip (binutils).
pub fn stripped_sanbench(bin: impl AsRef<Path>, dir: &Path) -> PathBuf {
    let sb = dir.join("sanbench");
    let st = Command::new("strip")
        .arg("-o")
        .arg(&sb)
        .arg(bin.as_ref())
        .status()
        .expect("strip (binutils)");
    assert!(st.success());
    sb
}

/// A running guest; killed by its process id when dropped.
pub struct Vm {
    child: Child,
    console: Arc<Mutex<String>>,
    pub dir: PathBuf,
}

impl Vm {
    /// Boots kernel `k` with the initramfs at `initrd`. `hostfwd`: (host port on 127.0.0.1,
    /// guest port); `guestfwd`: (guest port on 10.0.2.100, host port on 127.0.0.1), each
    /// guest connection relayed by a socat of its own.
    pub fn boot(
        vmlinuz: &Path,
        initrd: &Path,
        hostfwd: &[(u16, u16)],
        guestfwd: &[(u16, u16)],
    ) -> Vm {
        Vm::boot_with(vmlinuz, initrd, hostfwd, guestfwd, &[])
    }

    /// [`boot`](Self::boot) with more QEMU arguments: emulated devices, e.g. an NVMe
    /// controller over a raw file ([`nvme_drive`]).
    pub fn boot_with(
        vmlinuz: &Path,
        initrd: &Path,
        hostfwd: &[(u16, u16)],
        guestfwd: &[(u16, u16)],
        extra: &[String],
    ) -> Vm {
        let mut net = "user,id=n0,restrict=on".to_string();
        for (h, g) in hostfwd {
            net.push_str(&format!(",hostfwd=tcp:127.0.0.1:{h}-:{g}"));
        }
        for (g, h) in guestfwd {
            // `cmd:` spawns a relay per guest connection; a `tcp:` chardev would be one
            // connection that every guest connection shares (an NVMe host's admin and I/O
            // queues would arrive interleaved on one socket).
            crate::require("socat", "socat");
            net.push_str(&format!(
                ",guestfwd=tcp:10.0.2.100:{g}-cmd:socat - TCP:127.0.0.1:{h}"
            ));
        }
        let mut child = Command::new("qemu-system-x86_64")
            .args([
                "-accel",
                "tcg",
                "-m",
                "512",
                "-smp",
                "1",
                "-nographic",
                "-no-reboot",
            ])
            .args(["-netdev", &net, "-device", "virtio-net-pci,netdev=n0"])
            .args(extra)
            .arg("-kernel")
            .arg(boot_image(vmlinuz))
            .arg("-initrd")
            .arg(initrd)
            .args(["-append", "console=ttyS0 quiet panic=-1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("qemu-system-x86_64: install the Debian package qemu-system-x86");
        let console = Arc::new(Mutex::new(String::new()));
        for mut stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let c = console.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                let mut pending = Vec::new();
                while let Ok(n) = stream.read(&mut b) {
                    if n == 0 {
                        break;
                    }
                    pending.extend_from_slice(&b[..n]);
                    drain_utf8(&mut pending, &mut lock(&c));
                }
            });
        }
        Vm {
            child,
            console,
            dir: initrd.parent().unwrap_or(Path::new("/tmp")).to_path_buf(),
        }
    }

    pub fn console(&self) -> String {
        lock(&self.console).clone()
    }

    /// Waits until the console shows `marker`; panics with the console after `timeout`.
    pub fn wait_for(&mut self, marker: &str, timeout: Duration) -> String {
        let end = Instant::now() + timeout;
        loop {
            let c = self.console();
            if c.contains(marker) {
                return c;
            }
            if Instant::now() > end || matches!(self.child.try_wait(), Ok(Some(_))) {
                panic!("guest never printed {marker:?}; console:\n{c}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::drain_utf8;

    #[test]
    fn a_character_split_across_reads_arrives_whole() {
        let (mut p, mut out) = (Vec::new(), String::new());
        let pm = "± µs".as_bytes();
        p.extend_from_slice(&pm[..1]);
        drain_utf8(&mut p, &mut out);
        assert_eq!((out.as_str(), p.len()), ("", 1));
        p.extend_from_slice(&pm[1..4]);
        drain_utf8(&mut p, &mut out);
        assert_eq!((out.as_str(), p.len()), ("± ", 1));
        p.extend_from_slice(&pm[4..]);
        p.extend_from_slice(&[0xff, b'x']);
        drain_utf8(&mut p, &mut out);
        assert_eq!(out, "± µs\u{fffd}x");
        assert!(p.is_empty());
    }
}
