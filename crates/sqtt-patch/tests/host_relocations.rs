//! Host shared libraries whose wrapper bundle pointers are set by relocations other than
//! `R_X86_64_RELATIVE` (issue 39 item 2), as in Debian's RCCL 7.2.4 (`-fgpu-rdc`): wrappers
//! relocated by `R_X86_64_64` against `__hip_fatbin_*` aliases of one bundle, next to one
//! relocated by `R_X86_64_RELATIVE` or by `.relr.dyn`. Before this change `info` and `--fatbin`
//! exited 2 with "bundle pointer 0x0 is not inside a file-backed section".
//!
//! Each library is built here in a temporary directory (`cc` with GNU ld, `clang-22` with
//! `ld.lld-22`) from `fixtures/bundles/calls-4arch__plain.hipfb`. Oracles: `llvm-readelf-22 -r`
//! (the relocation kinds the linker emitted), the dynamic loader itself (a program `dlopen`s the
//! instrumented library and checks that every wrapper points at `__hip_fatbin_a`, then dumps
//! the bundle there), `clang-offload-bundler-22 --list/--unbundle` on that dump, and
//! `llvm-readelf-22 -s -S` for the alias symbols' values and sizes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// Three wrappers naming one bundle: through two global aliases (`R_X86_64_64`, preemptible
/// symbols) and through a hidden one (`R_X86_64_RELATIVE`, or `.relr.dyn` when packed).
const WRAPPERS_C: &str = r#"
struct hip_fatbin_wrapper { unsigned magic, version; const void *bundle; void *reserved; };
extern const char __hip_fatbin_a[], __hip_fatbin_b[];
extern const char fx_local_bundle[] __attribute__((visibility("hidden")));
__attribute__((used, section(".hipFatBinSegment"), aligned(8)))
static const struct hip_fatbin_wrapper wrappers[3] = {
  {0x48495046, 1, __hip_fatbin_a, 0},
  {0x48495046, 1, __hip_fatbin_b, 0},
  {0x48495046, 1, fx_local_bundle, 0},
};
const void *fx_wrappers(void) { return wrappers; }
"#;

/// The bundle, with `__hip_fatbin_b` sized like the bundle (the writer must resize it).
const BUNDLE_S: &str = r#"
  .section .hip_fatbin,"a",@progbits
  .p2align 12
  .globl __hip_fatbin_a
  .type __hip_fatbin_a,@object
  .globl __hip_fatbin_b
  .type __hip_fatbin_b,@object
  .globl fx_local_bundle
  .hidden fx_local_bundle
__hip_fatbin_a:
__hip_fatbin_b:
fx_local_bundle:
  .incbin "b.hipfb"
.Lend:
  .size __hip_fatbin_b, .Lend - __hip_fatbin_b
  .section .note.GNU-stack,"",@progbits
"#;

/// Loads the library as a program would and checks every wrapper against `__hip_fatbin_a`;
/// writes `argv[3]` bytes of the bundle to `argv[2]`.
const LOADER_C: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct hip_fatbin_wrapper { unsigned magic, version; const char *bundle; void *reserved; };
int main(int argc, char **argv) {
  if (argc != 4) return 9;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  const struct hip_fatbin_wrapper *(*f)(void) = (const struct hip_fatbin_wrapper *(*)(void))dlsym(h, "fx_wrappers");
  const char *a = dlsym(h, "__hip_fatbin_a");
  if (!f || !a) return 2;
  const struct hip_fatbin_wrapper *w = f();
  for (int i = 0; i < 3; i++)
    if (w[i].magic != 0x48495046 || w[i].bundle != a) {
      fprintf(stderr, "wrapper %d points at %p, __hip_fatbin_a is %p\n", i, (void *)w[i].bundle, (void *)a);
      return 3;
    }
  if (memcmp(a, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0) { fprintf(stderr, "no bundle magic\n"); return 4; }
  FILE *o = fopen(argv[2], "wb");
  if (!o || fwrite(a, 1, strtoul(argv[3], 0, 0), o) != strtoul(argv[3], 0, 0)) return 5;
  fclose(o);
  return 0;
}
"#;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn run(c: &mut Command) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// The linkers and options that give each relocation mix.
const LINKS: [(&str, &[&str]); 4] = [
    ("bfd", &[]),
    ("bfd-relr", &["-Wl,-z,pack-relative-relocs"]),
    ("lld-relr", &["-Wl,-z,pack-relative-relocs"]),
    ("lld-apply", &["-Wl,-z,apply-dynamic-relocs"]),
];

/// Builds the objects and the loader once, then `lib<name>.so` per [`LINKS`] entry.
fn build(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    std::fs::copy(
        fixture("bundles/calls-4arch__plain.hipfb"),
        dir.join("b.hipfb"),
    )
    .expect("copy bundle");
    std::fs::write(dir.join("w.c"), WRAPPERS_C).expect("write");
    std::fs::write(dir.join("b.s"), BUNDLE_S).expect("write");
    std::fs::write(dir.join("loader.c"), LOADER_C).expect("write");
    let cc = |args: &[&str]| run(Command::new("cc").current_dir(dir).args(args));
    cc(&["-c", "-fPIC", "w.c", "-o", "w.o"]);
    cc(&["-c", "b.s", "-o", "b.o"]);
    cc(&["loader.c", "-o", "loader", "-ldl"]);
    LINKS
        .iter()
        .map(|&(name, extra)| {
            let lib = dir.join(format!("lib{name}.so"));
            let mut c = if name.starts_with("lld") {
                let mut c = Command::new("clang-22");
                c.arg("--ld-path=/usr/lib/llvm-22/bin/ld.lld");
                c
            } else {
                Command::new("cc")
            };
            run(c
                .current_dir(dir)
                .args(["-shared", "w.o", "b.o", "-o"])
                .arg(&lib)
                .args(extra));
            (name, lib)
        })
        .collect()
}

/// `llvm-readelf-22 -W` with `args` on `f`.
fn readelf(args: &[&str], f: &Path) -> String {
    text(&run(Command::new("llvm-readelf-22").arg("-W").args(args).arg(f)).stdout)
}

/// Address, file offset and size of `.hip_fatbin` (from `llvm-readelf-22 -S`).
fn fatbin_section(f: &Path) -> (u64, u64, u64) {
    let s = readelf(&["-S"], f);
    let line = s
        .lines()
        .find(|l| l.contains(" .hip_fatbin "))
        .unwrap_or_else(|| panic!("no .hip_fatbin in {s}"));
    let t: Vec<&str> = line.split_whitespace().collect();
    let i = t.iter().position(|&w| w == ".hip_fatbin").expect("name");
    let hex = |w: &str| u64::from_str_radix(w, 16).expect("hex");
    (hex(t[i + 2]), hex(t[i + 3]), hex(t[i + 4]))
}

/// `(value, size)` of every `.dynsym` / `.symtab` entry named `name`.
fn symbols(f: &Path, name: &str) -> Vec<(u64, u64)> {
    readelf(&["-s"], f)
        .lines()
        .filter(|l| l.split_whitespace().last() == Some(name))
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (
                u64::from_str_radix(t[1], 16).expect("value"),
                t[2].parse().expect("size"),
            )
        })
        .collect()
}

fn sqtt(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run sqtt-patch")
}

#[test]
fn relocated_wrapper_pointers_are_read_and_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (name, lib) in build(d) {
        // The fixture is what it claims: two R_X86_64_64 wrappers, and the third relative.
        let r = readelf(&["-r"], &lib);
        assert_eq!(r.matches("R_X86_64_64 ").count(), 2, "{name}: {r}");
        assert!(
            r.contains("__hip_fatbin_a + 0") && r.contains("__hip_fatbin_b + 0"),
            "{r}"
        );
        assert_eq!(
            name.ends_with("relr"),
            r.contains(".relr.dyn"),
            "{name}: {r}"
        );

        let info = sqtt(&["info".as_ref(), lib.as_os_str()]);
        assert!(info.status.success(), "{name}: {}", text(&info.stderr));
        assert!(
            text(&info.stdout).contains("x86-64 host binary, 4 code object(s)"),
            "{name}: {}",
            text(&info.stdout)
        );

        let out = d.join(format!("lib{name}.instr.so"));
        let p = sqtt(&[
            "--fatbin".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--functions".as_ref(),
            "1".as_ref(),
        ]);
        assert!(p.status.success(), "{name}: {}", text(&p.stderr));
        let (old_addr, _, _) = fatbin_section(&lib);
        let (addr, _, size) = fatbin_section(&out);
        assert_ne!(addr, old_addr, "{name}: the bundle grew, so it was moved");

        // Every alias follows the bundle in both symbol tables; the sized one is resized.
        for (sym, sized) in [("__hip_fatbin_a", false), ("__hip_fatbin_b", true)] {
            let s = symbols(&out, sym);
            assert_eq!(s.len(), 2, "{name}: {sym} in .dynsym and .symtab: {s:?}");
            for (v, sz) in s {
                assert_eq!(v, addr, "{name}: {sym}");
                assert_eq!(sz, if sized { size } else { 0 }, "{name}: {sym} size");
            }
        }

        // The loader's view: every wrapper points at the new bundle.
        let dump = d.join(format!("{name}.dump.hipfb"));
        run(Command::new(d.join("loader"))
            .arg(&out)
            .arg(&dump)
            .arg(size.to_string()));
        let list = run(Command::new("clang-offload-bundler-22")
            .args(["--list", "--type=o"])
            .arg(format!("--input={}", dump.display())));
        let ids: Vec<String> = text(&list.stdout).lines().map(String::from).collect();
        assert_eq!(ids.len(), 5, "{name}: {ids:?}");
        let x = d.join(format!("{name}.extract"));
        let e = sqtt(&[
            "extract".as_ref(),
            out.as_os_str(),
            "-o".as_ref(),
            x.as_os_str(),
        ]);
        assert!(e.status.success(), "{name}: {}", text(&e.stderr));
        let id = "hipv4-amdgcn-amd-amdhsa--gfx942";
        let co = d.join(format!("{name}.gfx942.co"));
        let orig = d.join(format!("{name}.gfx942.orig.co"));
        for (input, file) in [(&dump, &co), (&d.join("b.hipfb"), &orig)] {
            run(Command::new("clang-offload-bundler-22")
                .args(["--unbundle", "--type=o", &format!("--targets={id}")])
                .arg(format!("--input={}", input.display()))
                .arg(format!("--output={}", file.display())));
        }
        let loaded = std::fs::read(&co).expect("read");
        let extracted = std::fs::read(x.join(format!("0-{id}.co"))).expect("extracted");
        assert_eq!(
            loaded, extracted,
            "{name}: the loader sees the instrumented object"
        );
        assert_ne!(
            loaded,
            std::fs::read(&orig).expect("read"),
            "{name}: instrumented"
        );
    }
}

#[test]
fn pointer_to_an_undefined_symbol_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let c = "struct w { unsigned m, v; const void *p; void *r; };\n\
             extern const char __hip_fatbin_elsewhere[];\n\
             __attribute__((used, section(\".hipFatBinSegment\"), aligned(8)))\n\
             static const struct w ws[1] = {{0x48495046, 1, __hip_fatbin_elsewhere, 0}};\n";
    std::fs::write(d.join("u.c"), c).expect("write");
    run(Command::new("cc")
        .current_dir(d)
        .args(["-shared", "-fPIC", "u.c", "-o", "libu.so"]));
    assert!(readelf(&["-r"], &d.join("libu.so")).contains("R_X86_64_64"));
    let o = sqtt(&["info".as_ref(), d.join("libu.so").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("undefined symbol"), "{err}");
    assert!(o.stdout.is_empty());
}
