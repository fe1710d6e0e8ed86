//! Progress of long runs (`--fatbin`, `batch`) on stderr with `indicatif`: code objects done /
//! found so far, input bytes done / total, rate and ETA. Hidden when stderr is not a terminal
//! (indicatif's stderr draw target draws nothing then), so logs and pipes get no control codes.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};

/// A progress line over a number of input bytes, counting code objects as they are found and
/// finished. Safe to update from rayon workers.
pub struct Progress {
    bar: ProgressBar,
    objects_found: AtomicU64,
    objects_done: AtomicU64,
}

impl Progress {
    /// A progress line for `total_bytes` of input, drawn on stderr when it is a terminal.
    pub fn new(total_bytes: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        Progress {
            bar,
            objects_found: AtomicU64::new(0),
            objects_done: AtomicU64::new(0),
        }
    }

    /// A progress that never draws (library callers, tests).
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
            objects_found: AtomicU64::new(0),
            objects_done: AtomicU64::new(0),
        }
    }

    fn show(&self) {
        let done = self.objects_done.load(Ordering::Relaxed);
        let found = self.objects_found.load(Ordering::Relaxed);
        self.bar.set_message(format!("{done}/{found} code objects"));
    }

    /// `n` more code objects are known (to be processed).
    pub fn found(&self, n: u64) {
        self.objects_found.fetch_add(n, Ordering::Relaxed);
        self.show();
    }

    /// `n` code objects finished.
    pub fn objects_done(&self, n: u64) {
        self.objects_done.fetch_add(n, Ordering::Relaxed);
        self.show();
    }

    /// `n` more input bytes are processed.
    pub fn bytes_done(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Removes the line (before the summary is printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
