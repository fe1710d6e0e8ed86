//! Worker threads: rayon's global pool, never larger than the machine's CPUs (issue 32:
//! `RAYON_NUM_THREADS=5000` spent 38 s starting threads). Outputs are identical for every
//! thread count (README "Crate choices"), so the cap changes only speed.

/// Builds rayon's global pool before any parallel work: `RAYON_NUM_THREADS` threads when set
/// to a number from 1 to the CPU count, the CPU count otherwise (more is capped, with a note
/// on stderr; 0 or a value that is not a number means rayon's default, the CPU count).
pub fn init() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let n = match asked {
        Some(n) if n > cpus => {
            eprintln!(
                "sqtt-patch: note: RAYON_NUM_THREADS={n} is more than the {cpus} CPUs; using {cpus} worker threads"
            );
            cpus
        }
        Some(n) if n > 0 => n,
        _ => cpus,
    };
    // Fails only when a pool exists already, which cannot happen before the first use.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global();
}
