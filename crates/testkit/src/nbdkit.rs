//! nbdkit with a Python plugin (package nbdkit-plugin-python), for the tests whose peer needs
//! behaviour no stock plugin has: a fault, a delay that depends on another export's traffic.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An nbdkit serving a Python plugin on a free loopback port, killed when dropped.
pub struct NbdkitPython {
    child: Child,
    /// `nbd://127.0.0.1:PORT`.
    pub uri: String,
}

impl NbdkitPython {
    /// Starts `nbdkit python PLUGIN PARAMS...` and waits (up to 15 s) until it listens.
    pub fn start(plugin: &Path, params: &[String]) -> NbdkitPython {
        crate::require("nbdkit", "nbdkit");
        let port = crate::free_port();
        let child = Command::new("nbdkit")
            .args(["-f", "-p", &port.to_string(), "-i", "127.0.0.1", "python"])
            .arg(plugin)
            .args(params)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nbdkit (package nbdkit-plugin-python)");
        let mut n = NbdkitPython {
            child,
            uri: format!("nbd://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(st)) = n.child.try_wait() {
                panic!(
                    "nbdkit python {} exited ({st}) before listening",
                    plugin.display()
                );
            }
            assert!(Instant::now() < deadline, "nbdkit python did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        n
    }
}

impl Drop for NbdkitPython {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
