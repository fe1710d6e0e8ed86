//! Interrupted runs leave no temporary output behind. Every output is first written to a
//! temporary file next to its destination ([`crate::output::Sink`]); a normal exit or an error
//! deletes or renames it, but SIGINT (Ctrl-C), SIGTERM and SIGHUP end the process without
//! running destructors. The temporary files alive at that moment are registered here, and the
//! signal handler (crate `ctrlc`, which runs it on its own thread, outside signal context)
//! deletes them and exits with status 130 (128 + SIGINT, as shells report Ctrl-C; used for all
//! three signals, because `ctrlc` does not say which one arrived).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Paths of the temporary files to delete if the run is interrupted.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Exit status of an interrupted run.
pub const INTERRUPTED: i32 = 130;

/// Installs the handler once, at start-up. A failure (a handler already installed by an
/// embedding process) only loses the clean-up, so it is reported and the run goes on.
pub fn install() {
    let installed = ctrlc::set_handler(|| {
        // Let the outputs being committed finish (a report and its object are renamed together,
        // never one without the other), and start no other commit.
        STOP.store(true, Ordering::SeqCst);
        while IN_COMMIT.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // The registry stays locked until the process ends: no temporary file can be created
        // (see `Registered::create`) after this clean-up.
        let mut files = live();
        for p in files.drain(..) {
            let _ = std::fs::remove_file(&p);
        }
        match KEPT.load(Ordering::SeqCst) {
            0 => eprintln!("sqtt-patch: interrupted; no output written"),
            n => eprintln!(
                "sqtt-patch: interrupted; {n} output(s) finished before the signal were kept (each whole), unfinished ones deleted"
            ),
        }
        std::process::exit(INTERRUPTED);
    });
    if let Err(e) = installed {
        eprintln!("sqtt-patch: warning: cannot install the interrupt handler ({e}); an interrupted run may leave a temporary file");
    }
}

/// Set by the handler: no commit may start any more.
static STOP: AtomicBool = AtomicBool::new(false);
/// Commits in progress, over all threads (the handler waits for 0).
static IN_COMMIT: AtomicUsize = AtomicUsize::new(0);
/// Outputs committed so far (for the handler's message).
static KEPT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Nesting depth of [`Committing`] guards on this thread.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// While alive, an interruption waits before cleaning up: the outputs committed under it are
/// renamed into place together or not at all. Nested guards on one thread are one commit.
pub struct Committing(());

impl Committing {
    /// Starts a commit; after an interruption it never returns (the handler ends the process).
    pub fn begin() -> Committing {
        let depth = DEPTH.with(|d| d.get());
        IN_COMMIT.fetch_add(1, Ordering::SeqCst);
        if depth == 0 && STOP.load(Ordering::SeqCst) {
            IN_COMMIT.fetch_sub(1, Ordering::SeqCst);
            wait_for_handler();
        }
        DEPTH.with(|d| d.set(depth + 1));
        Committing(())
    }
}

impl Drop for Committing {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        IN_COMMIT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a signal arrived: code that waits on something outside the process (a FIFO with no
/// reader) gives up, so that the handler, which waits for running commits, can end the run.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Never returns: after a signal, the handler thread ends the process.
pub fn wait_for_handler() -> ! {
    loop {
        std::thread::park();
    }
}

/// Counts one output written completely (renamed into place or streamed out).
pub fn kept() {
    KEPT.fetch_add(1, Ordering::SeqCst);
}

/// The registry, usable even after a thread panicked while holding it (it only holds paths).
fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A temporary file registered for deletion on interruption while this guard lives.
#[derive(Debug)]
pub struct Registered(PathBuf);

impl Registered {
    /// Creates a temporary file with `create` and registers its path, both under the registry's
    /// lock, so an interruption sees either no file or a registered one (a signal arriving
    /// between the two steps would otherwise leave the file behind).
    pub fn create<E>(
        create: impl FnOnce() -> Result<tempfile::NamedTempFile, E>,
    ) -> Result<(tempfile::NamedTempFile, Registered), E> {
        let mut files = live();
        let file = create()?;
        let path = file.path().to_path_buf();
        files.push(path.clone());
        Ok((file, Registered(path)))
    }
}

impl Registered {
    /// Makes a file at `path` with `make` and registers it, under the registry's lock, as
    /// [`Registered::create`] does for a named temporary file.
    pub fn make_at(
        path: PathBuf,
        make: impl FnOnce(&std::path::Path) -> std::io::Result<()>,
    ) -> std::io::Result<Registered> {
        let mut files = live();
        make(&path)?;
        files.push(path.clone());
        Ok(Registered(path))
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut l = live();
        if let Some(i) = l.iter().position(|p| *p == self.0) {
            l.swap_remove(i);
        }
    }
}
