//! Listing benchmark (release build, no harness): for each FILE, finds every bundle and code
//! object with [`hsaco::container::open`] and parses each with [`hsaco::CodeObject::parse`],
//! printing counts per target and the wall time of both steps (seconds).
//!
//! Run: `cargo bench -p hsaco --bench list_containers -- FILE...`; `tools/bench_containers.sh`
//! runs the built binary under `/usr/bin/time -v` next to `llvm-objdump-22 --offloading`.

use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let files: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = false;
    for f in &files {
        let t0 = Instant::now();
        let data = match std::fs::read(f) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{f}: {e}");
                failed = true;
                continue;
            }
        };
        let (kind, objects) =
            match hsaco::container::open(&data, hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{f}: {e}");
                    failed = true;
                    continue;
                }
            };
        let listed = t0.elapsed().as_secs_f64();
        let mut targets: BTreeMap<String, usize> = BTreeMap::new();
        let mut kernels = 0;
        for e in &objects {
            match hsaco::CodeObject::parse(&e.data) {
                Ok(co) => {
                    *targets.entry(co.target.target_id()).or_default() += 1;
                    kernels += co.kernels.len();
                }
                Err(err) => {
                    eprintln!("{f}: {}: {err}", e.file_name());
                    failed = true;
                }
            }
        }
        let parsed = t0.elapsed().as_secs_f64();
        let bundles = objects
            .iter()
            .map(|e| e.bundle_index)
            .max()
            .map_or(0, |m| m + 1);
        println!(
            "{f}: {kind:?}, {bundles} bundles, {} code objects, {kernels} kernels; list {listed:.2} s, list+parse {parsed:.2} s",
            objects.len()
        );
        for (t, n) in &targets {
            println!("  {t}: {n}");
        }
    }
    if failed {
        std::process::exit(2);
    }
}
