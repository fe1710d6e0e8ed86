//! Decode throughput versus `llvm-objdump-22 -d` on one big code object, same file, same run
//! (`cargo bench -p amdgpu-isa --bench decode [-- FILE]`).
//!
//! FILE defaults to `/work/thirdparty/objects/cupy-cub__gfx1201.co` (about 2.3 M
//! instructions, see /work/thirdparty/INDEX.md), else the largest object of
//! `../shared/corpus/{compiled,triton}`. Prints, in instructions per second:
//! - `decode_all` of every executable section (best of 5 runs);
//! - `decode_all` + `Display` of every instruction into one reused text buffer (best of 3);
//! - `llvm-objdump-22 -d --mcpu=<target>` on the file, wall time including process start and
//!   ELF parsing, output read through a pipe (one run; same instruction count);
//!
//! and the two ratios against llvm-objdump.
use amdgpu_isa::{decode_all, Target};
use object::{Object, ObjectSection, SectionFlags};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn pick_file() -> Option<PathBuf> {
    if let Some(a) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        return Some(PathBuf::from(a));
    }
    let big = Path::new("/work/thirdparty/objects/cupy-cub__gfx1201.co");
    if big.is_file() {
        return Some(big.to_path_buf());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
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

fn main() {
    let Some(path) = pick_file() else {
        eprintln!("no input object (give a path, or provide ../shared/corpus)");
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
    let bytes: usize = code.iter().map(Vec::len).sum();
    let mut n = 0usize;
    let mut dec = f64::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        n = code
            .iter()
            .map(|c| decode_all(c, t).map_or(0, |v| v.len()))
            .sum();
        dec = dec.min(t0.elapsed().as_secs_f64());
    }
    let mut fmt = f64::MAX;
    let mut chars = 0usize;
    let mut buf = String::with_capacity(64 << 20);
    for _ in 0..3 {
        buf.clear();
        let t1 = Instant::now();
        for c in &code {
            for i in decode_all(c, t).unwrap_or_default() {
                let _ = writeln!(buf, "{i}");
            }
        }
        fmt = fmt.min(t1.elapsed().as_secs_f64());
        chars = buf.len();
    }
    let t2 = Instant::now();
    let out = std::process::Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
        .arg("-d")
        .arg(format!("--mcpu={}", t.name()))
        .args(t.true16().then_some("--mattr=+real-true16"))
        .arg(&path)
        .output();
    let llvm = t2.elapsed().as_secs_f64();
    let llvm_lines = out
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with('\t') && l.contains("// "))
                .count()
        })
        .unwrap_or(0);
    let rate = |s: f64| n as f64 / s;
    println!(
        "file: {} ({}, {bytes} code bytes, {n} instructions; llvm-objdump lines {llvm_lines})",
        path.display(),
        t.name()
    );
    println!(
        "decode_all:            {:8.3} s  {:8.2} M inst/s",
        dec,
        rate(dec) / 1e6
    );
    println!(
        "decode_all + Display:  {:8.3} s  {:8.2} M inst/s ({chars} chars)",
        fmt,
        rate(fmt) / 1e6
    );
    println!(
        "llvm-objdump-22 -d:    {:8.3} s  {:8.2} M inst/s (wall, incl. process start)",
        llvm,
        rate(llvm) / 1e6
    );
    println!(
        "speed-up: decode {:.0}x, decode+format {:.1}x",
        llvm / dec,
        llvm / fmt
    );
}
