//! Decode throughput versus `llvm-objdump-22 -d` on one big code object, same file, same run
//! (`cargo bench -p amdgpu-isa --bench decode [-- FILE]`).
//!
//! FILE defaults to `$SQTT_REAL_DIR/objects/cub-gfx1201.co` (about 2.3 M instructions;
//! `SQTT_REAL_DIR` defaults to `target/real`, filled by `tools/fetch_real.sh`), else the largest object of
//! `fixtures/corpus/{compiled,triton}`. Measures every executable section:
//! - `decode_iter`: streaming decode, every instruction materialised, nothing kept (best of 15);
//! - `decode_all`: the same collected into a `Vec<Instruction>` (best of 5);
//! - `decode_iter` + `Display` of every instruction into one reused text buffer (best of 3);
//! - `llvm-objdump-22 -d --mcpu=<target>` on the file, output read through a pipe, including
//!   process start and ELF parsing (best of 2; same instruction count).
//!
//! Prints wall time, CPU time (our thread's `/proc/thread-self/schedstat` run time in ns;
//! llvm-objdump's user+system time from `/proc/self/stat` cutime+cstime in USER_HZ = 1/100 s
//! ticks), throughput, the speed-up ratios against llvm-objdump (wall and CPU) and the load
//! average. On a shared machine the CPU-time ratios are the stable ones: wall time also counts
//! waiting for a core.
use amdgpu_isa::{decode_all, decode_iter, Target};
use object::{Object, ObjectSection, SectionFlags};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn pick_file() -> Option<PathBuf> {
    if let Some(a) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        return Some(PathBuf::from(a));
    }
    let real = std::env::var_os("SQTT_REAL_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/real"),
        PathBuf::from,
    );
    let big = real.join("objects/cub-gfx1201.co");
    if big.is_file() {
        return Some(big);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    let mut best: Option<(u64, PathBuf)> = None;
    for sub in ["compiled", "triton"] {
        for e in std::fs::read_dir(root.join(sub))
            .ok()?
            .filter_map(|e| e.ok())
        {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            if best.as_ref().is_none_or(|b| len > b.0) {
                best = Some((len, e.path()));
            }
        }
    }
    best.map(|b| b.1)
}

/// CPU time of the calling thread in seconds (`/proc/thread-self/schedstat` field 1, ns).
fn thread_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// User + system CPU time of waited-for children in seconds (`/proc/self/stat` fields 16-17,
/// in USER_HZ = 100 ticks per second on Linux).
fn children_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = s.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the ')' field 3 (state) has index 0, so field n has index n - 3.
    let cutime: u64 = f.get(13)?.parse().ok()?;
    let cstime: u64 = f.get(14)?.parse().ok()?;
    Some((cutime + cstime) as f64 / 100.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Best (wall, CPU) seconds of `runs` runs of `f`; CPU is NaN when /proc does not tell.
fn best_of(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    let (mut wall, mut cpu) = (f64::MAX, f64::MAX);
    for _ in 0..runs {
        let c0 = thread_cpu();
        let t0 = Instant::now();
        f();
        wall = wall.min(t0.elapsed().as_secs_f64());
        cpu = cpu.min(match (c0, thread_cpu()) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        });
    }
    (wall, cpu)
}

fn main() {
    let Some(path) = pick_file() else {
        eprintln!("no input object (give a path; fixtures/corpus is missing)");
        return;
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return;
        }
    };
    let Ok(f) = object::File::parse(&*data) else {
        eprintln!("{}: not an ELF file", path.display());
        return;
    };
    let object::FileFlags::Elf { e_flags, .. } = f.flags() else {
        return;
    };
    let Some(mut t) = Target::from_elf_mach(e_flags.0 & 0xff) else {
        eprintln!("{}: unknown EF_AMDGPU_MACH", path.display());
        return;
    };
    let mut code = Vec::new();
    for s in f.sections() {
        if let SectionFlags::Elf { sh_flags, .. } = s.flags() {
            if sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0 {
                if let Ok(d) = s.data() {
                    code.push(d.to_vec());
                }
            }
        }
    }
    // true16 objects decode whole only in that mode (as in the corpus test).
    if code.iter().any(|c| decode_all(c, t).is_err()) {
        t = t.with_true16(true);
    }
    let load_before = load_average();
    let bytes: usize = code.iter().map(Vec::len).sum();
    let mut n = 0usize;
    let iter = best_of(15, || {
        n = 0;
        for c in &code {
            for i in decode_iter(c, t).map_while(Result::ok) {
                black_box(&i);
                n += 1;
            }
        }
    });
    let mut n_all = 0usize;
    let all = best_of(5, || {
        n_all = code
            .iter()
            .map(|c| decode_all(c, t).map_or(0, |v| black_box(v).len()))
            .sum();
    });
    let mut chars = 0usize;
    let mut buf = String::with_capacity(64 << 20);
    let fmt = best_of(3, || {
        buf.clear();
        for c in &code {
            for i in decode_iter(c, t).map_while(Result::ok) {
                let _ = writeln!(buf, "{i}");
            }
        }
        chars = black_box(&buf).len();
    });
    let mut llvm_lines = 0usize;
    let (mut llvm_wall, mut llvm_cpu) = (f64::MAX, f64::MAX);
    for _ in 0..2 {
        let c0 = children_cpu();
        let t0 = Instant::now();
        let out = std::process::Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
            .arg("-d")
            .arg(format!("--mcpu={}", t.name()))
            .args(t.true16().then_some("--mattr=+real-true16"))
            .arg(&path)
            .output();
        llvm_wall = llvm_wall.min(t0.elapsed().as_secs_f64());
        llvm_cpu = llvm_cpu.min(match (c0, children_cpu()) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        });
        llvm_lines = out
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.starts_with('\t') && l.contains("// "))
                    .count()
            })
            .unwrap_or(0);
    }
    let rate = |s: f64| n as f64 / s / 1e6;
    println!(
        "file: {} ({}, {bytes} code bytes, {n} instructions ({n_all} collected); llvm-objdump lines {llvm_lines})",
        path.display(),
        t.name()
    );
    println!(
        "load average: {load_before} before, {} after",
        load_average()
    );
    println!(
        "{:<32} {:>9} {:>9} {:>12} {:>11} {:>10}",
        "measurement", "wall s", "CPU s", "M inst/s", "x wall", "x CPU"
    );
    let row = |name: &str, (w, c): (f64, f64)| {
        println!(
            "{name:<32} {w:>9.3} {c:>9.3} {:>12.2} {:>10.1}x {:>9.1}x",
            rate(w),
            llvm_wall / w,
            llvm_cpu / c
        );
    };
    row("decode_iter (best of 15)", iter);
    row("decode_all (best of 5)", all);
    row("decode_iter + Display (best of 3)", fmt);
    row("llvm-objdump-22 -d (best of 2)", (llvm_wall, llvm_cpu));
    println!("({chars} chars of text)");
    println!(
        "speed-up vs llvm-objdump (wall / CPU): decode_iter {:.0}x / {:.0}x, decode_all {:.0}x / {:.0}x, decode+format {:.1}x / {:.1}x",
        llvm_wall / iter.0,
        llvm_cpu / iter.1,
        llvm_wall / all.0,
        llvm_cpu / all.1,
        llvm_wall / fmt.0,
        llvm_cpu / fmt.1
    );
}
