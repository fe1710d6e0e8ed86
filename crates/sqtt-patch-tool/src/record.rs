//! What happened to one code object: the fields of its report line, also kept in the cache.

use serde::{Deserialize, Serialize};
use sqtt_rewrite::rewrite::{Report, Status};

/// The outcome of one code object (its content, not where it came from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// `instrumented` or `unchanged`.
    pub status: String,
    /// Why it is unchanged (a class: `nothing to instrument`, `failed closed`, `verifier
    /// rejected`, `bad input`, `not an ELF code object`, ...); `None` when instrumented.
    pub unchanged_because: Option<String>,
    /// The details: the rewriter's fail-closed reasons, the verifier's findings, the input error.
    pub reasons: Vec<String>,
    /// The target (`gfx942`, ...), empty when the object could not be read.
    pub target: String,
    /// The kernels the object holds (symbol names).
    pub kernels: Vec<String>,
    /// Sites per feature: (feature, instrumented, found).
    pub coverage: Vec<(String, u64, u64)>,
    /// Size of the object handed to the loader (bytes).
    pub size_after: usize,
}

/// `instrumented`.
pub const INSTRUMENTED: &str = "instrumented";
/// `unchanged`.
pub const UNCHANGED: &str = "unchanged";

impl Record {
    /// An unchanged object that was never rewritten (`why`: its class; `detail`: the message).
    pub fn unchanged(why: &str, detail: String, size: usize) -> Record {
        Record {
            status: UNCHANGED.into(),
            unchanged_because: Some(why.into()),
            reasons: vec![detail],
            target: String::new(),
            kernels: Vec::new(),
            coverage: Vec::new(),
            size_after: size,
        }
    }

    /// The record of a verified rewrite (`rejected`: the verifier rejected it) whose output is
    /// `size_after` bytes.
    pub fn from_report(r: &Report, rejected: bool, size_after: usize) -> Record {
        let why = match r.status {
            Status::Instrumented => None,
            Status::NothingToDo => Some("nothing to instrument"),
            Status::FailedClosed if rejected => Some("verifier rejected"),
            Status::FailedClosed => Some("failed closed"),
        };
        Record {
            status: if why.is_none() {
                INSTRUMENTED
            } else {
                UNCHANGED
            }
            .into(),
            unchanged_because: why.map(str::to_string),
            reasons: r.reasons.clone(),
            target: r.target.clone(),
            kernels: r.kernels.iter().map(|k| k.name.clone()).collect(),
            coverage: r
                .coverage
                .iter()
                .map(|c| (c.feature.to_string(), c.instrumented, c.found))
                .collect(),
            size_after,
        }
    }

    /// True when the loader gets new bytes.
    pub fn instrumented(&self) -> bool {
        self.status == INSTRUMENTED
    }
}
