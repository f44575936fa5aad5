//! The front door's help (issue 41): options grouped under headings, help topics, shell
//! completions that the shell accepts, and man pages that render.

use assert_cmd::Command;

fn sanbench(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("sanbench")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Help headings: unindented lines that end with a colon, as clap prints them.
fn headings(help: &str) -> Vec<String> {
    help.lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':') && !l.starts_with("Usage"))
        .map(str::to_string)
        .collect()
}

#[test]
fn run_and_compare_help_group_their_options_under_headings() {
    for cmd in ["run", "compare", "crosscheck"] {
        let o = sanbench(&[cmd, "--help"]);
        assert!(o.status.success());
        let h = headings(&text(&o));
        assert!(h.len() >= 6, "{cmd} --help: {h:?}");
        for want in [
            "Workload:",
            "Data and verification:",
            "Monitors:",
            "Watching:",
            "Output:",
        ] {
            assert!(
                h.iter().any(|x| x == want),
                "{cmd} --help lacks {want}: {h:?}"
            );
        }
    }
    // `-h` stays short: one line per option.
    let short = text(&sanbench(&["run", "-h"]));
    let long = text(&sanbench(&["run", "--help"]));
    assert!(
        short.lines().count() < long.lines().count(),
        "-h is not shorter"
    );
}

#[test]
fn help_topics_and_commands() {
    let o = sanbench(&["help", "targets"]);
    assert!(o.status.success());
    let t = text(&o);
    for want in ["nvme+tcp://", "iscsi://", "policy=round-robin", "--force"] {
        assert!(t.contains(want), "help targets lacks {want}:\n{t}");
    }
    let run = text(&sanbench(&["help", "run"]));
    assert!(run.contains("Workload:") && run.contains("--qd"), "{run}");
    let nested = text(&sanbench(&["help", "serve", "nbd"]));
    assert!(nested.contains("--tls-certificates"), "{nested}");
    let top = text(&sanbench(&["help"]));
    assert!(
        top.contains("sanbench help TOPIC") && top.contains("exit-codes"),
        "{top}"
    );
    // clap's help subcommand below the top stays.
    let below = sanbench(&["serve", "help", "nbd"]);
    assert!(below.status.success() && text(&below).contains("--tls-certificates"));
    let bad = sanbench(&["help", "no-such-topic"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no-such-topic") && err.contains("targets"),
        "{err}"
    );
}

#[test]
fn bash_sources_the_completion_script() {
    let o = sanbench(&["completions", "bash"]);
    assert!(o.status.success());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sanbench.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let b = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -e; source '{}'; complete -p sanbench",
            script.display()
        ))
        .output()
        .expect("bash");
    assert!(
        b.status.success(),
        "bash could not source it: {}",
        String::from_utf8_lossy(&b.stderr)
    );
    assert!(String::from_utf8_lossy(&b.stdout).contains("sanbench"));
    // The script completes the subcommands and run's flags.
    let s = text(&o);
    assert!(s.contains("crosscheck") && s.contains("--metrics-listen"));
    for shell in ["zsh", "fish"] {
        let o = sanbench(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        assert!(text(&o).contains("metrics-listen"), "{shell}");
    }
    assert_eq!(sanbench(&["completions", "tcsh"]).status.code(), Some(2));
}

/// `sanbench man DIR` into a temporary directory: the directory and what it printed.
fn write_man() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = Command::cargo_bin("sanbench")
        .unwrap()
        .arg("man")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for page in [
        "sanbench.1",
        "sanbench-run.1",
        "sanbench-compare.1",
        "sanbench-serve-nbd.1",
    ] {
        assert!(out.join(page).exists(), "{page} missing: {}", text(&o));
    }
    (dir, out)
}

#[test]
fn man_pages_are_written_per_command() {
    let (_dir, out) = write_man();
    let run = std::fs::read_to_string(out.join("sanbench-run.1")).unwrap();
    // roff: a title line and run's options, grouped under the help's headings.
    for want in [".TH SANBENCH-RUN 1", ".SH WORKLOAD", "\\-\\-qd"] {
        assert!(run.contains(want), "sanbench-run.1 lacks {want}");
    }
}

/// man-db's `man -l` renders a page as a reader sees it (scripts/deps.sh installs man-db).
#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs man (man-db)")]
fn man_pages_render_with_man() {
    sanbench_testkit::require("man", "man-db");
    let (_dir, out) = write_man();
    let rendered = std::process::Command::new("man")
        .arg("-l")
        .arg(out.join("sanbench-run.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let page = String::from_utf8_lossy(&rendered.stdout);
    for want in ["sanbench-run", "--qd", "--bs", "WORKLOAD"] {
        assert!(page.contains(want), "rendered page lacks {want}:\n{page}");
    }
}
