//! Terminal output that fits (issue 41): the width to fit, and word wrapping with a hanging
//! indent. Tables choose their layout from the width (output::compare_table); sentences
//! (findings, notes, the design line) wrap here.

use std::io::IsTerminal;

/// Width used when stdout is not a terminal and COLUMNS is not set: logs and pipes stay
/// readable in a 100-column window.
pub const DEFAULT_WIDTH: usize = 100;

/// The width to fit: COLUMNS when set (the user's word, as for ls), else stdout's terminal
/// width, else [`DEFAULT_WIDTH`]; never below 40.
pub fn width() -> usize {
    let env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    env.filter(|&w| w > 0)
        .or_else(terminal_width)
        .unwrap_or(DEFAULT_WIDTH)
        .max(40)
}

fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: winsize is plain integers; all-zero is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which outlives the call; the fd is
    // stdout, open for the process's life.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// `text` wrapped at spaces to `width` columns: the first line starts with `first`, the
/// others with `rest`. A word longer than a line (a URI, a path) is kept whole on a line of
/// its own rather than cut. No trailing newline.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        let len = line.chars().count() + 1 + word.chars().count();
        if !empty && len > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out
}

/// Every prose line of `text` longer than `width` wrapped, with a hanging indent two
/// columns deeper than its own; table rows (a line with a run of spaces after its indent,
/// which columns make) are left whole, so that their columns stay aligned.
pub fn prose(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if line.chars().count() <= width || body.contains("  ") {
            out.push_str(line);
        } else {
            out.push_str(&wrap(body, width, indent, &format!("{indent}  ")));
        }
        out.push('\n');
    }
    if !text.ends_with('\n') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_the_width_with_a_hanging_indent() {
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let w = wrap(text, 20, "  - ", "    ");
        for l in w.lines() {
            assert!(l.chars().count() <= 20, "{l:?}");
        }
        assert!(w.starts_with("  - one"));
        assert!(w.lines().skip(1).all(|l| l.starts_with("    ")));
        let words: Vec<&str> = w.split_whitespace().filter(|x| *x != "-").collect();
        assert_eq!(words.join(" "), text);
    }

    #[test]
    fn a_long_word_is_kept_whole() {
        let w = wrap(
            "see nbd://a-very-long-host-name.example/export now",
            12,
            "",
            "",
        );
        assert!(w
            .lines()
            .any(|l| l == "nbd://a-very-long-host-name.example/export"));
    }

    #[test]
    fn prose_wraps_and_tables_stay() {
        let row = format!("{:<30}{:>10}{:>10}", "target", "IOPS", "MB/s");
        let long = "warning: ".to_string() + &"word ".repeat(40);
        let text = format!("{row}\n{}\n", long.trim_end());
        let out = prose(&text, 60);
        assert!(out.starts_with(&format!("{row}\n")), "{out}");
        assert!(
            out.lines().skip(1).all(|l| l.chars().count() <= 60),
            "{out}"
        );
        assert!(out.lines().nth(2).unwrap().starts_with("  word"), "{out}");
        assert!(out.ends_with('\n'));
    }
}
