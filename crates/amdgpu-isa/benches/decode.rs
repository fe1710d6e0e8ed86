//! Decode throughput versus llvm-objdump-22 on the corpus (`cargo bench -p amdgpu-isa`).
//! Prints instructions/s for `decode_all`, for `decode_all` + `Display`, and for
//! `llvm-objdump-22 -d` on the same files (wall time, including process start and ELF parsing).
use amdgpu_isa::{decode_all, Target};
use object::{Object, ObjectSection, SectionFlags};
use std::path::Path;
use std::time::Instant;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/compiled");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("corpus not found at {}", dir.display());
        return;
    };
    let mut jobs = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let Ok(data) = std::fs::read(e.path()) else {
            continue;
        };
        let Ok(f) = object::File::parse(&*data) else {
            continue;
        };
        let object::FileFlags::Elf { e_flags, .. } = f.flags() else {
            continue;
        };
        let Some(t) = Target::from_elf_mach(e_flags.0 & 0xff) else {
            continue;
        };
        for s in f.sections() {
            if let SectionFlags::Elf { sh_flags, .. } = s.flags() {
                if sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0 {
                    if let Ok(d) = s.data() {
                        jobs.push((e.path(), t, d.to_vec()));
                    }
                }
            }
        }
    }
    let reps = 20;
    let mut n = 0usize;
    let t0 = Instant::now();
    for _ in 0..reps {
        for (_, t, code) in &jobs {
            n += decode_all(code, *t).map_or(0, |v| v.len());
        }
    }
    let dec = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut chars = 0usize;
    for (_, t, code) in &jobs {
        for i in decode_all(code, *t).unwrap_or_default() {
            chars += i.to_string().len();
        }
    }
    let fmt = t1.elapsed().as_secs_f64();
    let per_rep = n / reps;
    println!(
        "decode_all: {per_rep} instructions x {reps}: {:.1} M inst/s",
        n as f64 / dec / 1e6
    );
    println!(
        "decode_all + Display: {:.2} M inst/s ({chars} chars)",
        per_rep as f64 / fmt / 1e6
    );
    let t2 = Instant::now();
    for (p, t, _) in &jobs {
        let _ = std::process::Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
            .arg("-d")
            .arg(format!("--mcpu={}", t.name()))
            .arg(p)
            .output();
    }
    let llvm = t2.elapsed().as_secs_f64();
    println!(
        "llvm-objdump-22 -d: {:.2} M inst/s (wall, incl. process start)",
        per_rep as f64 / llvm / 1e6
    );
}
