//! The Key Findings on the terminal, fitted (issue 41): each finding wrapped to the width,
//! and a note that several findings carry (the report's `headroom::finding_note`: both
//! served over this host's loopback, both limited by the initiator's CPU) said once above
//! them instead of in every sentence. The report keeps each sentence whole; only the
//! terminal hoists.

/// One finding's sentence and the note the report appended to it, if any.
pub struct Shown {
    pub text: String,
    pub note: Option<String>,
}

/// The sentence without its note, and the note without its parentheses.
fn split(s: &Shown) -> (&str, Option<&str>) {
    let Some(note) = s.note.as_deref() else {
        return (&s.text, None);
    };
    match s.text.strip_suffix(note) {
        Some(body) if !body.trim().is_empty() => {
            let bare = note.trim().trim_start_matches('(').trim_end_matches(')');
            (body.trim_end(), Some(bare))
        }
        _ => (&s.text, None),
    }
}

/// The findings as terminal lines: notes that two or more findings share printed once
/// above them (a note every finding shares as "Note: ..."; the others numbered, and each
/// finding that has one marked "[n]"), each finding as "  - " and wrapped to `width`.
pub fn render(findings: &[Shown], width: usize) -> String {
    let parts: Vec<(&str, Option<&str>)> = findings.iter().map(split).collect();
    let count = |n: &str| parts.iter().filter(|(_, x)| *x == Some(n)).count();
    let all = |n: &str| findings.len() >= 2 && count(n) == findings.len();
    let mut shared: Vec<&str> = Vec::new();
    for (_, n) in &parts {
        if let Some(n) = n {
            if count(n) >= 2 && !shared.contains(n) {
                shared.push(n);
            }
        }
    }
    let mut out = String::new();
    let mut numbered: Vec<&str> = Vec::new();
    for n in &shared {
        if all(n) {
            out.push_str(&sanbench_session::fit::wrap(
                &format!("Note: {n}."),
                width,
                "  ",
                "  ",
            ));
        } else {
            numbered.push(n);
            let line = format!("[{}] {n}.", numbered.len());
            out.push_str(&sanbench_session::fit::wrap(&line, width, "  ", "      "));
        }
        out.push('\n');
    }
    for (s, (body, note)) in findings.iter().zip(&parts) {
        let shown = match note {
            Some(n) if all(n) => body.to_string(),
            Some(n) => match numbered.iter().position(|x| x == n) {
                Some(i) => format!("{body} [{}]", i + 1),
                None => s.text.clone(),
            },
            None => s.text.clone(),
        };
        out.push_str(&sanbench_session::fit::wrap(&shown, width, "  - ", "    "));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOP: &str = "(both served over loopback on this host: this compares the \
                        implementations' CPU and wake-up costs, not interconnects)";

    fn with(text: &str, note: Option<&str>) -> Shown {
        Shown {
            text: match note {
                Some(n) => format!("{text} {n}"),
                None => text.to_string(),
            },
            note: note.map(str::to_string),
        }
    }

    #[test]
    fn a_note_every_finding_shares_is_said_once_above_them() {
        let f = [
            with(
                "A shows 1.4x greater bandwidth than B (2 of 2 tests)",
                Some(LOOP),
            ),
            with("C and D are within 10 % on 2 of 2 tests", Some(LOOP)),
        ];
        let out = render(&f, 100);
        assert_eq!(out.matches("loopback").count(), 1, "{out}");
        assert!(
            out.lines().next().unwrap().contains("Note: both served"),
            "{out}"
        );
        assert!(
            out.contains("  - A shows 1.4x greater bandwidth than B (2 of 2 tests)\n"),
            "{out}"
        );
        assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    }

    #[test]
    fn a_note_some_share_is_numbered_and_a_lone_one_stays() {
        let cpu = "(both limited by the initiator host's CPU: this compares CPU cost per I/O)";
        let f = [
            with("A leads B", Some(LOOP)),
            with("A leads C", Some(LOOP)),
            with("B leads C", Some(cpu)),
        ];
        let out = render(&f, 100);
        assert_eq!(out.matches("loopback").count(), 1, "{out}");
        assert!(out.contains("[1] both served"), "{out}");
        assert!(out.contains("  - A leads B [1]\n"), "{out}");
        assert!(out.contains("B leads C (both limited by"), "{out}");
    }

    #[test]
    fn sentences_that_only_end_alike_are_not_notes() {
        let f = [
            with("A leads B (2 of 2 tests)", None),
            with("C leads D (2 of 2 tests)", None),
        ];
        let out = render(&f, 100);
        assert!(!out.contains("Note"), "{out}");
        assert_eq!(out.matches("(2 of 2 tests)").count(), 2, "{out}");
    }
}
