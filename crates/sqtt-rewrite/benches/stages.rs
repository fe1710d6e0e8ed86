//! Criterion benches of the pipeline stages (issue 15) on fixture objects, no downloads:
//! `cargo bench -p sqtt-rewrite --bench stages`.
//!
//! Each stage is timed by the same hooks `--timings` uses ([`sqtt_rewrite::timings`]): a
//! criterion sample runs the whole rewrite and reports only the wall time of the stage under
//! test (`iter_custom`), so the stages are measured inside the real pipeline, not in isolation.
//! Groups: `decode`, `analyse+instrument`, `layout+encode` (lay out and the ELF rebuilt around
//! the new `.text`), `verify` (the independent translation validator on the rewrite's output,
//! called directly). Options: `--functions 1 --barriers 1 --memory 2:5`.
//!
//! Objects (`fixtures/objects`, see `fixtures/README.md`): `gfx942__long-branch__O3.co` (a loop
//! of 36,864 `s_nop`, branches relaxed into long-branch sequences) and `gfx90a__memory__O3-g.co`
//! (memory operations, DWARF remapped).

use criterion::{criterion_group, criterion_main, Criterion};
use sqtt_rewrite::config::{self, Options};
use sqtt_rewrite::rewrite::rewrite_timed;
use sqtt_rewrite::timings::{Stage, Timings};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

const OBJECTS: [&str; 2] = ["gfx942__long-branch__O3.co", "gfx90a__memory__O3-g.co"];

fn options() -> Options {
    Options {
        functions: config::parse_functions("1").expect("threshold"),
        barriers: true,
        memory: config::parse_memory("2:5").expect("chunking"),
        ..Options::default()
    }
}

fn load(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Wall time of `stages` summed over `iters` full rewrites of `input`.
fn stage_time(input: &[u8], opts: &Options, stages: &[Stage], iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut t = Timings::new(false);
        let out = rewrite_timed(input, opts, &mut t).expect("rewrite");
        t.end();
        black_box(out);
        total += stages.iter().map(|&s| t.wall(s)).sum::<Duration>();
    }
    total
}

fn stages(c: &mut Criterion) {
    let opts = options();
    for name in OBJECTS {
        let input = load(name);
        let groups: [(&str, &[Stage]); 3] = [
            ("decode", &[Stage::Decode]),
            ("analyse+instrument", &[Stage::Analyse, Stage::Instrument]),
            ("layout+encode", &[Stage::LayOut, Stage::Encode]),
        ];
        for (group, st) in groups {
            c.bench_function(&format!("{group}/{name}"), |b| {
                b.iter_custom(|iters| stage_time(&input, &opts, st, iters))
            });
        }
        let output = rewrite_timed(&input, &opts, &mut Timings::off())
            .expect("rewrite")
            .bytes
            .expect("the fixture is instrumented");
        c.bench_function(&format!("verify/{name}"), |b| {
            b.iter_custom(|iters| {
                let t0 = Instant::now();
                for _ in 0..iters {
                    let r = sqtt_verify::verify(&input, &output).expect("verify");
                    assert!(r.is_clean(), "{:?}", r.findings.first());
                    black_box(r);
                }
                t0.elapsed()
            })
        });
    }
}

criterion_group! {
    name = benches;
    // Few samples: every sample is a full rewrite, and the machine is shared.
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3));
    targets = stages
}
criterion_main!(benches);
