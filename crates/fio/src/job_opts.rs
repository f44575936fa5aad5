//! One fio job section's options as the import looks them up: by canonical name, with
//! `--fio-ignore` applied, unset environment variables and bad values reported as one line
//! each under the option's name and place in the file (crates/fio/src/import.rs maps them).

use std::collections::HashMap;

use super::ini::Opt;
use super::options::canonical;

pub(crate) struct Ctx<'a> {
    pub(crate) section: &'a str,
    pub(crate) opts: HashMap<String, (usize, &'a Opt)>,
    pub(crate) ignore: &'a [String],
    pub(crate) problems: Vec<String>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn ignored(&self, key: &str) -> bool {
        self.ignore.iter().any(|i| canonical(i) == key)
    }

    /// Reports a problem with an option (unless it is ignored).
    pub(crate) fn problem(&mut self, key: &str, msg: impl std::fmt::Display) {
        if self.ignored(key) {
            return;
        }
        let (at, shown) = match self.opts.get(key) {
            Some((_, o)) => (
                o.at.as_str(),
                match &o.value {
                    Some(v) => format!("{}={v}", o.key),
                    None => o.key.clone(),
                },
            ),
            None => ("", key.to_string()),
        };
        let at = if at.is_empty() {
            String::new()
        } else {
            format!("{at}: ")
        };
        self.problems.push(format!(
            "{at}[{}] {shown}: {msg} (--fio-ignore {key} runs without it)",
            self.section
        ));
    }

    /// The value of an option if given (a bare option reads as "1"), unless ignored or its
    /// value named an unset variable.
    pub(crate) fn get(&mut self, key: &str) -> Option<&'a str> {
        if self.ignored(key) {
            return None;
        }
        let (_, o) = *self.opts.get(key)?;
        if let Some(var) = &o.unset_env {
            self.problem(key, format!("the environment variable {var} is not set"));
            return None;
        }
        Some(o.value.as_deref().unwrap_or("1"))
    }

    pub(crate) fn order(&self, key: &str) -> Option<usize> {
        self.opts.get(key).map(|o| o.0)
    }

    /// Parses an option's value, reporting a failure under its name.
    pub(crate) fn parse<T>(
        &mut self,
        key: &str,
        f: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let v = self.get(key)?;
        match f(v) {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(key, e);
                None
            }
        }
    }
}
