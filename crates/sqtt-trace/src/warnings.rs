//! Counted warnings: every malformed or unusable piece of input is counted under a class, with
//! the first occurrence kept as an example. Nothing here aborts.

use std::collections::BTreeMap;
use std::fmt;

/// Warning classes with counts and the first example of each.
#[derive(Debug, Default, Clone)]
pub struct Warnings {
    classes: BTreeMap<&'static str, (u64, String)>,
}

impl Warnings {
    /// Counts one occurrence of `class`; `example` is kept if it is the first.
    pub fn add(&mut self, class: &'static str, example: impl FnOnce() -> String) {
        self.add_n(class, 1, example);
    }

    /// Counts `n` occurrences of `class`.
    pub fn add_n(&mut self, class: &'static str, n: u64, example: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        let e = self.classes.entry(class).or_insert_with(|| (0, example()));
        e.0 += n;
    }

    /// Count of one class (0 when absent).
    pub fn count(&self, class: &str) -> u64 {
        self.classes.get(class).map_or(0, |e| e.0)
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }
}

impl fmt::Display for Warnings {
    /// One line per class: `warning: <class>: <count> (first: <example>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (class, (n, ex)) in &self.classes {
            writeln!(f, "warning: {class}: {n} (first: {ex})")?;
        }
        Ok(())
    }
}
