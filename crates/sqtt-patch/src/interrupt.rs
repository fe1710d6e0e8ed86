//! Interrupted runs leave no temporary output behind. Every output is first written to a
//! temporary file next to its destination ([`crate::output::Sink`]); a normal exit or an error
//! deletes or renames it, but SIGINT (Ctrl-C), SIGTERM and SIGHUP end the process without
//! running destructors. The temporary files alive at that moment are registered here, and the
//! signal handler (crate `ctrlc`, which runs it on its own thread, outside signal context)
//! deletes them and exits with status 130 (128 + SIGINT, as shells report Ctrl-C; used for all
//! three signals, because `ctrlc` does not say which one arrived).

use std::path::PathBuf;
use std::sync::Mutex;

/// Paths of the temporary files to delete if the run is interrupted.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Exit status of an interrupted run.
pub const INTERRUPTED: i32 = 130;

/// Installs the handler once, at start-up. A failure (a handler already installed by an
/// embedding process) only loses the clean-up, so it is reported and the run goes on.
pub fn install() {
    let installed = ctrlc::set_handler(|| {
        // The registry stays locked until the process ends: no temporary file can be created
        // (see `Registered::create`) after this clean-up.
        let mut files = live();
        for p in files.drain(..) {
            let _ = std::fs::remove_file(&p);
        }
        eprintln!("sqtt-patch: interrupted; no output written");
        std::process::exit(INTERRUPTED);
    });
    if let Err(e) = installed {
        eprintln!("sqtt-patch: warning: cannot install the interrupt handler ({e}); an interrupted run may leave a temporary file");
    }
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
        files.push(file.path().to_path_buf());
        let path = file.path().to_path_buf();
        Ok((file, Registered(path)))
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
