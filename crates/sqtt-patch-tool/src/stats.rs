//! Counts over the process's life and the one summary line printed on stderr at exit.

use crate::record::Record;
use std::collections::BTreeMap;

/// What the tool saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// Code objects that reached one of our entries.
    pub seen: u64,
    /// Of those, handed to the loader instrumented.
    pub instrumented: u64,
    /// Of those, read from the cache (instrumented or not).
    pub cached: u64,
    /// Unchanged objects by class (`nothing to instrument`, `failed closed`, ...).
    pub unchanged: BTreeMap<String, u64>,
    /// Sites instrumented per feature, summed over instrumented objects.
    pub sites: BTreeMap<String, u64>,
    /// Problems with our own outputs (cache, save directory, report file), by kind; the
    /// objects themselves were not affected.
    pub output_errors: BTreeMap<&'static str, u64>,
}

impl Stats {
    /// Counts one object's outcome (`cached`: it came from the cache).
    pub fn add(&mut self, r: &Record, cached: bool) {
        self.seen += 1;
        self.cached += u64::from(cached);
        if r.instrumented() {
            self.instrumented += 1;
            for (f, n, _) in &r.coverage {
                *self.sites.entry(f.clone()).or_default() += n;
            }
        } else {
            let why = r.unchanged_because.clone().unwrap_or_default();
            *self.unchanged.entry(why).or_default() += 1;
        }
    }

    /// Counts an object the loader got unchanged for a reason found outside the rewrite (a
    /// caught panic, an unreadable file, the loader refusing the instrumented bytes).
    pub fn add_unchanged(&mut self, why: &str) {
        self.seen += 1;
        *self.unchanged.entry(why.to_string()).or_default() += 1;
    }

    /// Turns one counted instrumented object into an unchanged one (`why`).
    pub fn demote(&mut self, r: &Record, why: &str) {
        if r.instrumented() {
            self.instrumented -= 1;
            for (f, n, _) in &r.coverage {
                if let Some(s) = self.sites.get_mut(f) {
                    *s -= n;
                }
            }
            *self.unchanged.entry(why.to_string()).or_default() += 1;
        }
    }

    /// The summary line (no newline): `sqtt-patch-tool: 3 code objects seen, 2 instrumented (1
    /// from the cache), 1 unchanged (1 not an ELF code object); sites: barriers 21, functions 2`.
    pub fn line(&self) -> String {
        let unchanged: u64 = self.unchanged.values().sum();
        let mut s = format!(
            "sqtt-patch-tool: {} code objects seen, {} instrumented, {} unchanged",
            self.seen, self.instrumented, unchanged
        );
        if unchanged > 0 {
            let list: Vec<String> = self
                .unchanged
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            s += &format!(" ({})", list.join(", "));
        }
        s += &format!(", {} from the cache", self.cached);
        let sites: Vec<String> = self.sites.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s += &format!(
            "; sites: {}",
            if sites.is_empty() {
                "none".to_string()
            } else {
                sites.join(", ")
            }
        );
        if !self.output_errors.is_empty() {
            let list: Vec<String> = self
                .output_errors
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            s += &format!("; output errors: {}", list.join(", "));
        }
        s
    }
}
