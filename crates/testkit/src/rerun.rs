//! Runs the current test binary again with one environment variable set, so that a
//! binary's tests are run a second time under a setting read from the environment (the
//! io_uring socket features: `SANBENCH_SOCKRING_FEATURES`) without changing each test.

use std::process::Command;

/// Runs the tests of the current binary that libtest's `args` choose (a name filter,
/// `--skip` the caller itself) in a child with `vars` set; `Ok(true)` when they passed,
/// `Ok(false)` when this process is that child (the first variable is already set: nothing
/// to do), `Err` with the child's output when one failed or none ran.
pub fn rerun_with_env(vars: &[(&str, &str)], args: &[&str]) -> Result<bool, String> {
    let Some(&(var, value)) = vars.first() else {
        return Err("rerun_with_env: no variable".into());
    };
    if std::env::var_os(var).is_some() {
        return Ok(false);
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .envs(vars.iter().copied())
        .args(args)
        .args(["--test-threads", "2"])
        .output()
        .map_err(|e| format!("running the tests again: {e}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!("with {var}={value}:\n{text}"));
    }
    if !text.contains("test result: ok") || text.contains("running 0 tests") {
        return Err(format!("with {var}={value}: no test ran:\n{text}"));
    }
    Ok(true)
}
