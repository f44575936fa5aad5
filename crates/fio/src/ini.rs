//! fio's INI dialect (fio's `__parse_jobs_ini` in init.c), without I/O: the caller hands in
//! the environment and reads `include`d files.
//!
//! - A `;` or `#` anywhere on a line starts a comment (fio's `strip_blank_end`).
//! - `[name]` starts a section; a name beginning with `global` is a global section, whose
//!   options apply to every job section after it (a later `[global]` adds to them).
//! - `key=value` or a bare `key` (a boolean set to 1); `${VAR}` is replaced by the environment
//!   variable anywhere in the line. fio substitutes an unset variable with nothing; here the
//!   option remembers the name, and using its value is an error (an option the mapping never
//!   reads, such as a `filename` the command line replaces, may refer to an unset one).
//! - `include FILE` inside a section reads FILE's options into it (FILE holds no sections;
//!   the caller resolves a relative name against the including file, as fio does).

use super::FioError;

/// How deep `include` may nest (fio has no limit; a file including itself would loop).
const MAX_INCLUDE_DEPTH: usize = 8;

/// One option as written, with where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Opt {
    pub key: String,
    pub value: Option<String>,
    /// `file:line`, for messages.
    pub at: String,
    /// An environment variable the line named that is not set.
    pub unset_env: Option<String>,
}

/// One job section: the global options in force when it began, then its own, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub name: String,
    pub options: Vec<Opt>,
}

/// What the parser asks of its caller.
pub trait Host {
    fn env(&self, name: &str) -> Option<String>;
    /// The text of an included file, named as written, from the file `from`; returns the name
    /// to report it by and its text.
    fn include(&mut self, from: &str, name: &str) -> Result<(String, String), String>;
}

struct Parser<'h> {
    host: &'h mut dyn Host,
    global: Vec<Opt>,
    jobs: Vec<Section>,
    /// The section options go to: None before any, Some(None) global, Some(Some(i)) job i.
    cur: Option<Option<usize>>,
}

/// Parses a job file into its job sections (globals applied, in file order).
pub fn parse(text: &str, origin: &str, host: &mut dyn Host) -> Result<Vec<Section>, FioError> {
    let mut p = Parser {
        host,
        global: Vec::new(),
        jobs: Vec::new(),
        cur: None,
    };
    p.lines(text, origin, 0)?;
    Ok(p.jobs)
}

impl Parser<'_> {
    fn lines(&mut self, text: &str, origin: &str, depth: usize) -> Result<(), FioError> {
        for (i, raw) in text.lines().enumerate() {
            let at = format!("{origin}:{}", i + 1);
            let line = match raw.find([';', '#']) {
                Some(c) => &raw[..c],
                None => raw,
            }
            .trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                if depth > 0 {
                    return Err(FioError::syntax(
                        &at,
                        "an included file may not start sections",
                    ));
                }
                let name = rest
                    .strip_suffix(']')
                    .ok_or_else(|| FioError::syntax(&at, "a section name lacks its ']'"))?
                    .trim();
                if name.is_empty() {
                    return Err(FioError::syntax(&at, "empty section name"));
                }
                self.cur = Some(if name.starts_with("global") {
                    None
                } else {
                    self.jobs.push(Section {
                        name: name.to_string(),
                        options: self.global.clone(),
                    });
                    Some(self.jobs.len() - 1)
                });
                continue;
            }
            let Some(cur) = self.cur else {
                return Err(FioError::syntax(
                    &at,
                    format!("option '{line}' outside of a [section]"),
                ));
            };
            if let Some(name) = line.strip_prefix("include") {
                if name.starts_with(char::is_whitespace) {
                    if depth + 1 > MAX_INCLUDE_DEPTH {
                        return Err(FioError::syntax(&at, "includes nest too deep"));
                    }
                    let name = name.trim();
                    let (shown, text) = self
                        .host
                        .include(origin, name)
                        .map_err(|e| FioError::syntax(&at, format!("include {name}: {e}")))?;
                    self.lines(&text, &shown, depth + 1)?;
                    continue;
                }
            }
            let (line, unset_env) = self.substitute(line);
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
                None => (line.as_str(), None),
            };
            if key.is_empty() {
                return Err(FioError::syntax(&at, "an option without a name"));
            }
            let opt = Opt {
                key: key.to_string(),
                value,
                at,
                unset_env,
            };
            match cur {
                None => self.global.push(opt),
                Some(j) => self.jobs[j].options.push(opt),
            }
        }
        Ok(())
    }

    /// `${VAR}` replaced from the environment; an unset one becomes empty (as in fio) and is
    /// named in the result.
    fn substitute(&self, line: &str) -> (String, Option<String>) {
        let mut out = String::with_capacity(line.len());
        let mut unset = None;
        let mut rest = line;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start + 2..].find('}').filter(|l| *l > 0) else {
                break;
            };
            out.push_str(&rest[..start]);
            let name = &rest[start + 2..start + 2 + len];
            match self.host.env(name) {
                Some(v) => out.push_str(&v),
                None => unset = Some(name.to_string()),
            }
            rest = &rest[start + 3 + len..];
        }
        out.push_str(rest);
        (out, unset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    pub(crate) struct Fake {
        pub env: HashMap<String, String>,
        pub files: HashMap<String, String>,
    }

    impl Host for Fake {
        fn env(&self, name: &str) -> Option<String> {
            self.env.get(name).cloned()
        }
        fn include(&mut self, _from: &str, name: &str) -> Result<(String, String), String> {
            self.files
                .get(name)
                .map(|t| (name.to_string(), t.clone()))
                .ok_or_else(|| "no such file".into())
        }
    }

    fn fake() -> Fake {
        Fake {
            env: [("DEV".to_string(), "/dev/shm/x".to_string())].into(),
            files: [(
                "common.fio".to_string(),
                "bs=8k\n# c\niodepth=4\n".to_string(),
            )]
            .into(),
        }
    }

    fn keys(s: &Section) -> Vec<(String, Option<String>)> {
        s.options
            .iter()
            .map(|o| (o.key.clone(), o.value.clone()))
            .collect()
    }

    #[test]
    fn globals_apply_to_the_jobs_after_them() {
        let text = "; comment\n[global]\nrw=randread ; why\nfilename=${DEV}\n\n[a]\nbs=4k\n\
                    [global]\ndirect=1\n[b]\ntime_based\n";
        let jobs = parse(text, "j.fio", &mut fake()).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].name, "a");
        let s = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        assert_eq!(
            keys(&jobs[0]),
            vec![
                s("rw", "randread"),
                s("filename", "/dev/shm/x"),
                s("bs", "4k")
            ]
        );
        assert_eq!(
            keys(&jobs[1]),
            vec![
                s("rw", "randread"),
                s("filename", "/dev/shm/x"),
                s("direct", "1"),
                ("time_based".to_string(), None)
            ]
        );
        assert_eq!(jobs[1].options[3].at, "j.fio:11");
    }

    #[test]
    fn includes_and_unset_variables() {
        let jobs = parse("[a]\ninclude common.fio\nuri=${NOPE}\n", "j", &mut fake()).unwrap();
        assert_eq!(jobs[0].options[0].key, "bs");
        assert_eq!(jobs[0].options[1].at, "common.fio:3");
        assert_eq!(jobs[0].options[2].unset_env.as_deref(), Some("NOPE"));
        assert_eq!(jobs[0].options[2].value.as_deref(), Some(""));
    }

    #[test]
    fn errors_name_the_line() {
        let mut f = fake();
        f.files
            .insert("loop.fio".into(), "include loop.fio\n".into());
        f.files.insert("sect.fio".into(), "[x]\n".into());
        let cases = [
            ("bs=4k\n", "j:1: option 'bs=4k' outside of a [section]"),
            ("[a\n", "j:1: a section name lacks its ']'"),
            (
                "[a]\ninclude missing.fio\n",
                "j:2: include missing.fio: no such file",
            ),
            ("[a]\ninclude loop.fio\n", "includes nest too deep"),
            (
                "[a]\ninclude sect.fio\n",
                "sect.fio:1: an included file may not start sections",
            ),
            ("[a]\n=4\n", "j:2: an option without a name"),
        ];
        for (text, want) in cases {
            let e = parse(text, "j", &mut f).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
