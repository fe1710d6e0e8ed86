//! `--fatbin`: every code object inside bundle files and host ELFs goes through the bare-object
//! path. Oracles: the bare path itself (`patch_code_object` on each original object extracted
//! with hsaco), llvm-objdump-22 --offloading, llvm-readelf-22 -a, clang-offload-bundler-22
//! -list/-unbundle, and the fixture host programs (stub HIP runtime) run after rewriting.

#[allow(dead_code)]
#[path = "../src/anonfile.rs"]
mod anonfile;
#[allow(dead_code)]
#[path = "../src/cmd_patch.rs"]
mod cmd_patch;
#[allow(dead_code)]
#[path = "../src/exit.rs"]
mod exit;
#[path = "../src/fatbin.rs"]
mod fatbin;
#[path = "../src/fatbin_store.rs"]
mod fatbin_store;
#[allow(dead_code)]
#[path = "../src/interrupt.rs"]
mod interrupt;
#[allow(dead_code)]
#[path = "../src/kpack.rs"]
mod kpack;
#[allow(dead_code)]
#[path = "../src/output.rs"]
mod output;
#[allow(dead_code)]
#[path = "../src/progress.rs"]
mod progress;
#[allow(dead_code)]
#[path = "../src/sniff.rs"]
mod sniff;
#[allow(dead_code)]
#[path = "../src/summary.rs"]
mod summary;
#[allow(dead_code)]
#[path = "../src/timings.rs"]
mod timings;

use std::path::{Path, PathBuf};
use std::process::Command;

use fatbin::{instrument_container, instrument_container_into, ArchFilter, ContainerReport};
use hsaco::bundle::{Storage, DEFAULT_DECOMPRESS_LIMIT};
use hsaco::container::{open, Embedded, InputKind};
use hsaco::hostwrite::{scan_host, BundleFormat, HostWriteMode};
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::Status;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus() -> PathBuf {
    let c = root().join("fixtures/corpus");
    assert!(
        c.join("MANIFEST.tsv").exists(),
        "corpus not found at {} (expected <workspace>/fixtures/corpus)",
        c.display()
    );
    c
}

fn no_llvm() -> bool {
    std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1")
}

fn tool(name: &str) -> Option<PathBuf> {
    if no_llvm() {
        return None;
    }
    let p = PathBuf::from("/usr/lib/llvm-22/bin").join(name);
    assert!(
        p.exists(),
        "{} missing (set SQTT_NO_LLVM=1 to skip)",
        p.display()
    );
    Some(p)
}

/// Functions threshold 1 and barriers on.
fn opts() -> Options {
    Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        ..Options::default()
    }
}

/// `instrument_container_into` a `Cursor<Vec<u8>>`: the output bytes and the full report.
fn streamed(name: &str, input: &[u8], filter: &ArchFilter) -> (Vec<u8>, ContainerReport) {
    let mut out = std::io::Cursor::new(Vec::new());
    let r = instrument_container_into(
        name,
        input,
        &opts(),
        filter,
        BundleFormat::Keep,
        &progress::Progress::hidden(),
        &mut out,
    )
    .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    (out.into_inner(), r)
}

/// A new, empty file opened for reading and writing (the writer reads bundles back).
fn rw_file(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            exts.is_empty() || exts.iter().any(|x| n.ends_with(x))
        })
        .collect();
    v.sort();
    v
}

fn hosts() -> Vec<PathBuf> {
    let mut v = files(&root().join("fixtures/hosts"), &[".elf", ".so"]);
    v.extend(files(&corpus().join("hosts"), &[".elf", ".so"]));
    v
}

fn bundle_files() -> Vec<PathBuf> {
    let mut v = files(&root().join("fixtures/bundles"), &[]);
    v.extend(files(&corpus().join("bundles"), &[]));
    v
}

/// What the bare-object path produces for every original code object of `input`.
fn expected(name: &str, input: &[u8]) -> Vec<(Embedded, Vec<u8>)> {
    let (_, cos) = open(input, DEFAULT_DECOMPRESS_LIMIT).expect("open original");
    cos.into_iter()
        .map(|e| {
            let p = cmd_patch::patch_code_object(name, &e.data, &opts()).expect("bare path");
            (e, p.bytes)
        })
        .collect()
}

fn unbundle(cob: &Path, bundle: &[u8], want: &[(&str, &[u8])], what: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("b");
    std::fs::write(&f, bundle).expect("write");
    let o = Command::new(cob)
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", f.display()))
        .output()
        .expect("clang-offload-bundler");
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    for (id, bytes) in want {
        assert!(listed.lines().any(|l| l == *id), "{what}: {id} not listed");
        let t = dir.path().join("t");
        let o = Command::new(cob)
            .args(["-unbundle", "-type=o"])
            .arg(format!("-targets={id}"))
            .arg(format!("-input={}", f.display()))
            .arg(format!("-output={}", t.display()))
            .output()
            .expect("clang-offload-bundler");
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            std::fs::read(&t).expect("unbundled") == *bytes,
            "{what}: {id} differs"
        );
    }
}

/// Checks one rewritten container against the bare path and the LLVM oracles.
fn check(path: &Path, input: &[u8], out: &[u8], want: &[(Embedded, Vec<u8>)]) {
    let what = path.display().to_string();
    let (kind, got) = open(out, DEFAULT_DECOMPRESS_LIMIT).expect("open output");
    assert_eq!(got.len(), want.len(), "{what}: code object count");
    for (g, (w, bytes)) in got.iter().zip(want) {
        assert_eq!((g.bundle_index, &g.id), (w.bundle_index, &w.id), "{what}");
        assert!(
            g.data == *bytes,
            "{what}: {} differs from the bare path",
            g.id
        );
        // Same bundle format: plain stays plain, a CCOB keeps version and method.
        match (&g.storage, &w.storage) {
            (Some(Storage::Compressed(a)), Some(Storage::Compressed(b))) => {
                assert_eq!((a.version, a.method), (b.version, b.method), "{what}")
            }
            (Some(Storage::Plain), Some(Storage::Plain)) => {}
            (a, b) => panic!("{what}: storage {b:?} became {a:?}"),
        }
    }
    let (Some(objdump), Some(readelf), Some(cob)) = (
        tool("llvm-objdump"),
        tool("llvm-readelf"),
        tool("clang-offload-bundler"),
    ) else {
        return;
    };
    let bundle_ranges: Vec<(u64, u64)> = if kind == InputKind::Host {
        scan_host(out)
            .expect("rescan")
            .bundles
            .iter()
            .map(|b| (b.location.offset, b.location.extent))
            .collect()
    } else {
        hsaco::hostwrite::locate_bundles(out, 0..out.len() as u64)
            .expect("locate")
            .iter()
            .map(|b| (b.offset, b.extent))
            .collect()
    };
    for (bi, (off, len)) in bundle_ranges.iter().enumerate() {
        let entries: Vec<(&str, &[u8])> = want
            .iter()
            .filter(|(e, _)| e.bundle_index == bi)
            .map(|(e, b)| (e.id.as_str(), b.as_slice()))
            .collect();
        unbundle(
            &cob,
            &out[*off as usize..(*off + *len) as usize],
            &entries,
            &what,
        );
    }
    if kind != InputKind::Host {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("out"), out).expect("write");
    let o = Command::new(&readelf)
        .args(["-a", "-W"])
        .arg(dir.path().join("out"))
        .output()
        .expect("llvm-readelf");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.trim().is_empty(),
        "{what}: llvm-readelf -a: {err}"
    );
    let o = Command::new(&objdump)
        .args(["--offloading", "out"])
        .current_dir(dir.path())
        .output()
        .expect("llvm-objdump");
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // llvm-objdump-22 walks the bundles of the first bundle's kind (it searches for that magic)
    // and, for compressed bundles, gets names and sizes right but copies bytes from the host
    // file at decompressed offsets (also on clang's own output): compare contents of plain
    // bundles, names and sizes of all. clang-offload-bundler checked every byte above.
    let (_, orig_bundles) = open(input, DEFAULT_DECOMPRESS_LIMIT).expect("open");
    let kind_of = |bi: usize| {
        orig_bundles
            .iter()
            .find(|e| e.bundle_index == bi)
            .is_some_and(|e| matches!(e.storage, Some(Storage::Compressed(_))))
    };
    let first = kind_of(0);
    let visible: Vec<usize> = (0..bundle_ranges.len())
        .filter(|&b| kind_of(b) == first)
        .collect();
    let mut n = 0;
    for (vi, bi) in visible.iter().enumerate() {
        for (e, bytes) in want.iter().filter(|(e, _)| e.bundle_index == *bi) {
            let f = dir.path().join(format!("out.{vi}.{}", e.id));
            let got = std::fs::read(&f)
                .unwrap_or_else(|_| panic!("{what}: llvm-objdump did not extract {}", f.display()));
            assert_eq!(got.len(), bytes.len(), "{what}: {}", f.display());
            assert!(first || got == *bytes, "{what}: {} differs", f.display());
            n += 1;
        }
    }
    assert!(n > 0, "{what}: llvm-objdump extracted nothing");
}

#[test]
fn every_container_matches_the_bare_object_path_and_llvm_tools() {
    let (mut n, mut instrumented) = (0, 0);
    for p in hosts().into_iter().chain(bundle_files()) {
        let input = std::fs::read(&p).expect("read");
        let name = p.display().to_string();
        let out = instrument_container(&name, &input, &opts(), &ArchFilter::default())
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let want = expected(&name, &input);
        assert_eq!(out.objects.len(), want.len(), "{name}");
        assert!(out.objects.iter().all(|o| !o.verifier_rejected), "{name}");
        let any = out
            .objects
            .iter()
            .any(|o| o.report.status == Status::Instrumented);
        // No change at all: the container is copied byte for byte.
        assert_eq!(out.bytes == input, !any, "{name}");
        check(&p, &input, &out.bytes, &want);
        n += 1;
        instrumented += usize::from(any);
    }
    assert!(n >= 23, "only {n} containers");
    assert!(
        instrumented >= 20,
        "only {instrumented} containers instrumented"
    );
}

#[test]
fn rewritten_fixture_programs_run_and_register_every_fat_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hd = root().join("fixtures/hosts");
    for f in [
        "libfx_hip.so",
        "x86_64__fx-app__pie.elf",
        "x86_64__fx-app__nopie.elf",
    ] {
        let input = std::fs::read(hd.join(f)).expect("read");
        let (bytes, r) = streamed(f, &input, &ArchFilter::default());
        assert!(
            matches!(r.host_write, Some(HostWriteMode::Appended { .. })),
            "{f}: {:?}",
            r.host_write
        );
        let p = dir.path().join(f);
        std::fs::write(&p, &bytes).expect("write");
        let mut perm = std::fs::metadata(&p).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod");
    }
    for exe in ["x86_64__fx-app__pie", "x86_64__fx-app__nopie"] {
        let o = Command::new(dir.path().join(format!("{exe}.elf")))
            .output()
            .expect("run");
        assert!(
            o.status.success(),
            "{exe}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let got = String::from_utf8_lossy(&o.stdout).into_owned();
        let want =
            std::fs::read_to_string(hd.join(format!("{exe}.expected-stdout"))).expect("expected");
        assert_eq!(got.lines().next(), want.lines().next(), "{exe}");
        let starts = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| l.starts_with("fatbin "))
                .map(|l| l[..l.find("starts").unwrap_or(0)].to_string())
                .collect()
        };
        assert_eq!(starts(&got), starts(&want), "{exe}");
        assert_ne!(
            got, want,
            "{exe}: the runtime must see the rewritten (larger) entries"
        );
    }
}

#[test]
fn offload_arch_filter_limits_the_instrumented_targets() {
    let p = root().join("fixtures/hosts/x86_64__fx-app__pie.elf");
    let input = std::fs::read(&p).expect("read");
    let f = ArchFilter::new(&["gfx942".to_string()]).expect("filter");
    let (bytes, out) = streamed("pie", &input, &f);
    assert_eq!(out.objects.len(), 2);
    assert!(out.objects.iter().all(|o| o.target.starts_with("gfx942")));
    assert_eq!(out.filtered_out, 2);
    let (_, before) = open(&input, DEFAULT_DECOMPRESS_LIMIT).expect("open");
    let (_, after) = open(&bytes, DEFAULT_DECOMPRESS_LIMIT).expect("open");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b.id, a.id);
        assert_eq!(b.data == a.data, !b.id.ends_with("gfx942"), "{}", b.id);
    }
    assert!(ArchFilter::new(&["sm_90".to_string()]).is_err());
    let typo = ArchFilter::new(&["gfx94".to_string()]).expect_err("unknown processor");
    assert!(
        format!("{typo:#}")
            .starts_with("--offload-arch \"gfx94\": not a processor sqtt-patch supports (gfx900, "),
        "{typo:#}"
    );
    assert!(ArchFilter::new(&["gfx11-generic".to_string()]).is_ok());
    assert!(ArchFilter::new(&["gfx90a:xnack+".to_string()])
        .expect("ok")
        .matches("gfx90a:sramecc-:xnack+"));
    assert!(!ArchFilter::new(&["gfx90a:xnack+".to_string()])
        .expect("ok")
        .matches("gfx90a:xnack-"));
    // A feature that is not xnack/sramecc would select nothing (fresh tester: accepted).
    assert!(ArchFilter::new(&["gfx942:bogus+".to_string()]).is_err());
    assert!(ArchFilter::new(&["gfx942:sramecc-:xnack+".to_string()]).is_ok());
}

#[test]
fn bad_inputs_fail_with_file_and_offset_and_write_nothing() {
    let hd = root().join("fixtures/hosts");
    let err = |name: &str, d: &[u8]| {
        format!(
            "{:#}",
            instrument_container(name, d, &opts(), &ArchFilter::default()).expect_err(name)
        )
    };
    let mut d = std::fs::read(hd.join("x86_64__fx-app__pie.elf")).expect("read");
    let i = d
        .windows(12)
        .position(|w| w == b".hip_fatbin\0")
        .expect("name");
    d[i + 10] = b'X';
    let e = err("nofat.elf", &d);
    assert!(
        e.starts_with("nofat.elf: not a HIP host binary: no .hip_fatbin section in the section header table at offset 0x"),
        "{e}"
    );
    assert!(e.contains("no .hip_fatbin section"), "{e}");

    let mut d = std::fs::read(hd.join("x86_64__fx-app__nopie.elf")).expect("read");
    let w = scan_host(&d).expect("scan").wrappers[0].offset as usize;
    d[w + 8..w + 16].copy_from_slice(&0x7fff_0000_0000u64.to_le_bytes());
    assert_eq!(
        err("wrap.elf", &d),
        format!("wrap.elf: malformed fat binary wrapper at offset {:#x}: bundle pointer 0x7fff00000000 points outside the file (no file-backed section holds it)", w + 8)
    );

    let b = std::fs::read(root().join("fixtures/bundles/calls-4arch__plain.hipfb")).expect("read");
    let e = err("trunc.hipfb", &b[..b.len() - 100]);
    assert!(
        e.starts_with(
            "trunc.hipfb: offload bundle entry 4 (hipv4-amdgcn-amd-amdhsa--gfx1201) at offset 0x"
        ),
        "{e}"
    );
    assert!(e.contains("extends past the end of the data"), "{e}");

    let c = std::fs::read(root().join("fixtures/bundles/calls-4arch__ccob-v3-zstd.hipfb"))
        .expect("read");
    let e = err("trunc.ccob", &c[..c.len() - 1]);
    assert!(
        e.starts_with("trunc.ccob: compressed offload bundle at offset 0x0: total size"),
        "{e}"
    );

    let o = std::fs::read(corpus().join("hosts/x86_64__app-mini__4arch-newdriver-rdc.o"))
        .expect("read");
    let e = err("rdc.o", &o);
    assert!(
        e.contains(
            "rdc.o: malformed host ELF at offset 0x10: relocatable object with .llvm.offloading"
        ),
        "{e}"
    );

    // run(): no partial output on error.
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.hipfb");
    std::fs::write(&bad, &b[..b.len() - 100]).expect("write");
    let args = cmd_patch::PatchArgs {
        input: Some(bad),
        output: Some(dir.path().join("out")),
        common: cmd_patch::CommonArgs {
            flags: cmd_patch::InstrumentFlags {
                functions: Some("1".into()),
                barriers: Some("1".into()),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(fatbin::run(&args).is_err());
    assert!(!dir.path().join("out").exists());

    // A host cut in the middle of its second bundle, read by offset from its file: an error
    // naming the file and an offset, no output.
    let h = std::fs::read(hd.join("x86_64__fx-app__pie.elf")).expect("read");
    let l = scan_host(&h).expect("scan").bundles[1].location;
    let cut = dir.path().join("cut.elf");
    std::fs::write(&cut, &h[..(l.offset + l.extent / 2) as usize]).expect("write");
    let args = cmd_patch::PatchArgs {
        input: Some(cut.clone()),
        ..args
    };
    let e = format!("{:#}", fatbin::run(&args).expect_err("cut host"));
    assert!(
        e.starts_with(&format!(
            "{}: a corrupt or truncated ELF file: section header table at offset 0x",
            cut.display()
        )),
        "{e}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn run_writes_the_container_and_one_merged_json_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = root().join("fixtures/hosts/libfx_hip.so");
    let args = cmd_patch::PatchArgs {
        input: Some(input.clone()),
        output: Some(dir.path().join("lib.so")),
        common: cmd_patch::CommonArgs {
            flags: cmd_patch::InstrumentFlags {
                functions: Some("1".into()),
                barriers: Some("1".into()),
                ..Default::default()
            },
            report_json: Some(dir.path().join("r.json")),
            offload_arch: vec!["gfx1030".to_string()],
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(fatbin::run(&args).expect("run"), exit::OK);
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).expect("json"))
            .expect("parse");
    let objs = j["objects"].as_array().expect("objects");
    assert_eq!(objs.len(), 2);
    assert_eq!(j["filtered_out"], 4);
    assert!(
        objs.iter()
            .all(|o| o["target"] == "gfx1030" && o["report"]["status"] == "instrumented"),
        "{j}"
    );
    let out = std::fs::read(dir.path().join("lib.so")).expect("output");
    let want = expected("lib", &std::fs::read(&input).expect("read"));
    let (_, got) = open(&out, DEFAULT_DECOMPRESS_LIMIT).expect("open");
    for (g, (w, _)) in got.iter().zip(&want) {
        assert_eq!(g.data == w.data, !g.id.ends_with("gfx1030"), "{}", g.id);
    }
}

/// A host binary sqtt-patch already instrumented is refused as a whole (usage error, nothing
/// written), as a single code object is; `--force` instruments it again.
#[test]
fn an_instrumented_host_is_refused_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = |input: PathBuf, output: PathBuf, force: bool| cmd_patch::PatchArgs {
        input: Some(input),
        output: Some(output),
        common: cmd_patch::CommonArgs {
            flags: cmd_patch::InstrumentFlags {
                functions: Some("1".into()),
                force,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let once = dir.path().join("once.so");
    let input = root().join("fixtures/hosts/libfx_hip.so");
    assert_eq!(
        fatbin::run(&args(input, once.clone(), false)).expect("first run"),
        exit::OK
    );
    let twice = dir.path().join("twice.so");
    let err = fatbin::run(&args(once.clone(), twice.clone(), false)).expect_err("refused");
    assert!(
        format!("{err:#}").contains("already instrumented")
            && format!("{err:#}").contains("--force"),
        "{err:#}"
    );
    assert!(!twice.exists(), "nothing written");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n != "once.so")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(
        fatbin::run(&args(once, twice.clone(), true)).expect("forced"),
        exit::OK
    );
    assert!(twice.exists());
}

/// Benchmark hook (ignored by default): instruments `$SQTT_FATBIN_BENCH` with functions 1 and
/// barriers on, streaming to the file `$SQTT_FATBIN_BENCH_OUT` as the CLI does; run under
/// `/usr/bin/time -v`.
#[test]
#[ignore]
fn bench_instrument_env_file() {
    let p = std::env::var("SQTT_FATBIN_BENCH").expect("SQTT_FATBIN_BENCH");
    let o = std::env::var("SQTT_FATBIN_BENCH_OUT").expect("SQTT_FATBIN_BENCH_OUT");
    let input = std::fs::read(&p).expect("read");
    let mut file = rw_file(Path::new(&o));
    let out = instrument_container_into(
        &p,
        &input,
        &opts(),
        &ArchFilter::default(),
        BundleFormat::Keep,
        &progress::Progress::hidden(),
        &mut file,
    )
    .expect("instrument");
    let count = |s: Status| out.objects.iter().filter(|o| o.report.status == s).count();
    eprintln!(
        "{} objects: {} instrumented, {} nothing to do, {} failed closed, {} verifier-rejected; {:?}",
        out.objects.len(),
        count(Status::Instrumented),
        count(Status::NothingToDo),
        count(Status::FailedClosed),
        out.objects.iter().filter(|o| o.verifier_rejected).count(),
        out.host_write
    );
}

/// The CLI streams into a file (written, read back when a bundle moves from its slot to the
/// appended segment, resized at the end); the batch mode and the tests above write into
/// memory. Both must give the same bytes for every container, including a host rebuilt as
/// zstd CCOB v3 and a bundle file, and `run` must leave exactly those bytes at OUT.
#[test]
fn streaming_to_a_file_equals_the_in_memory_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    for p in hosts().into_iter().chain(bundle_files()) {
        let input = std::fs::read(&p).expect("read");
        let name = p.display().to_string();
        for format in [
            BundleFormat::Keep,
            BundleFormat::Compressed {
                version: 3,
                method: hsaco::bundle::Method::Zstd,
            },
        ] {
            let mut mem = std::io::Cursor::new(Vec::new());
            let a = instrument_container_into(
                &name,
                &input,
                &opts(),
                &ArchFilter::default(),
                format,
                &progress::Progress::hidden(),
                &mut mem,
            )
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            let path = dir.path().join("out");
            let mut file = rw_file(&path);
            let b = instrument_container_into(
                &name,
                &input,
                &opts(),
                &ArchFilter::default(),
                format,
                &progress::Progress::hidden(),
                &mut file,
            )
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            drop(file);
            assert_eq!(a.host_write, b.host_write, "{name} {format:?}");
            assert!(
                std::fs::read(&path).expect("read back") == mem.get_ref()[..],
                "{name} {format:?}: file and memory outputs differ"
            );
        }
        let out = dir.path().join("run-out");
        let args = cmd_patch::PatchArgs {
            input: Some(p.clone()),
            output: Some(out.clone()),
            common: cmd_patch::CommonArgs {
                flags: cmd_patch::InstrumentFlags {
                    functions: Some("1".into()),
                    barriers: Some("1".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        fatbin::run(&args).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let want = instrument_container(&name, &input, &opts(), &ArchFilter::default())
            .expect("instrument");
        assert!(
            std::fs::read(&out).expect("run output") == want.bytes,
            "{name}: run wrote other bytes"
        );
    }
}

/// `-fgpu-rdc` links carry one metadata note per translation unit: every kernel's `.sgpr_count`
/// must cover the reserved SGPRs, in whichever note lists it (only the first note was updated
/// before, which the verifier could not see either).
#[test]
fn every_metadata_note_of_an_rdc_link_covers_the_reserved_sgprs() {
    let host = std::fs::read(corpus().join("hosts/x86_64__app-mini__4arch-newdriver-rdc.elf"))
        .expect("read");
    let (_, entries) = open(&host, DEFAULT_DECOMPRESS_LIMIT).expect("open");
    // Address tracing needs loop SGPRs above every SGPR the object uses.
    let tracing = Options {
        trace_addresses: sqtt_rewrite::config::parse_trace_addresses("memory,lds").expect("option"),
        ..Options::default()
    };
    let mut checked = 0;
    for e in entries.iter().filter(|e| !e.data.is_empty()) {
        let before = hsaco::CodeObject::parse(&e.data).expect("parse");
        assert!(before.metadata.len() > 1, "{}: one metadata note", e.id);
        let p = cmd_patch::patch_code_object(&e.id, &e.data, &tracing).expect("patch");
        assert_eq!(p.report.status, Status::Instrumented, "{}", e.id);
        assert!(!p.report.inserted_sgprs.is_empty(), "{}", e.id);
        // The verifier checks each kernel's `.sgpr_count` against the SGPRs inserted code writes
        // in its call graph, reading the kernel's own note.
        let v = sqtt_verify::verify(&e.data, &p.bytes).expect("verify");
        assert!(v.is_clean(), "{}: {:?}", e.id, v.findings);
        let after = hsaco::CodeObject::parse(&p.bytes).expect("parse output");
        assert_eq!(after.metadata.len(), before.metadata.len());
        for k in &after.kernels {
            let (m, i) = after.kernel_metadata(k).expect("kernel metadata");
            let n = m.kernel_u64(i, ".sgpr_count").expect(".sgpr_count");
            let (bm, bi) = before.kernel_metadata(k).expect("kernel metadata before");
            let b = bm
                .kernel_u64(bi, ".sgpr_count")
                .expect(".sgpr_count before");
            assert!(n >= b, "{} {}: {b} -> {n}", e.id, k.name);
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} kernels checked");
}

/// `--compress-bundles`: every rebuilt bundle becomes a zstd CCOB v3, whatever its input format
/// (plain, CCOB v1/v2 zlib, ...); bundles whose code objects are unchanged keep their bytes; the
/// code objects equal the bare path's; clang-offload-bundler-22 lists and unbundles every
/// bundle of the output (oracle), and a host whose plain bundles had to move grows less than
/// with the input's format.
#[test]
fn compress_bundles_writes_zstd_ccob_v3_that_clang_offload_bundler_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cob = tool("clang-offload-bundler");
    let mut smaller = 0;
    for p in hosts().into_iter().chain(bundle_files()) {
        let name = p.display().to_string();
        let input = std::fs::read(&p).expect("read");
        let run = |compress: bool, out: &Path| {
            let args = cmd_patch::PatchArgs {
                input: Some(p.clone()),
                output: Some(out.to_path_buf()),
                compress_bundles: compress,
                common: cmd_patch::CommonArgs {
                    flags: cmd_patch::InstrumentFlags {
                        functions: Some("1".into()),
                        barriers: Some("1".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            };
            fatbin::run(&args).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            std::fs::read(out).expect("output")
        };
        let kept = run(false, &dir.path().join("kept"));
        let out = run(true, &dir.path().join("compressed"));
        let want = expected(&name, &input);
        let (kind, got) = open(&out, DEFAULT_DECOMPRESS_LIMIT).expect("open output");
        let (_, orig) = open(&input, DEFAULT_DECOMPRESS_LIMIT).expect("open input");
        assert_eq!(got.len(), want.len(), "{name}: code object count");
        let changed = |bi: usize| {
            want.iter()
                .any(|(e, b)| e.bundle_index == bi && e.data != *b)
        };
        for ((g, (w, bytes)), o) in got.iter().zip(&want).zip(&orig) {
            assert!(
                g.data == *bytes,
                "{name}: {} differs from the bare path",
                g.id
            );
            if changed(g.bundle_index) {
                match &g.storage {
                    Some(Storage::Compressed(h)) => assert_eq!(
                        (h.version, h.method),
                        (3, hsaco::bundle::Method::Zstd),
                        "{name}: {}",
                        w.id
                    ),
                    s => panic!("{name}: {}: rebuilt bundle stored as {s:?}", w.id),
                }
            } else {
                assert_eq!(g.storage, o.storage, "{name}: unchanged bundle re-encoded");
            }
        }
        if out.len() < kept.len() {
            smaller += 1;
        }
        let Some(cob) = &cob else { continue };
        let ranges: Vec<(u64, u64)> = if kind == InputKind::Host {
            scan_host(&out)
                .expect("rescan")
                .bundles
                .iter()
                .map(|b| (b.location.offset, b.location.extent))
                .collect()
        } else {
            hsaco::hostwrite::locate_bundles(&out, 0..out.len() as u64)
                .expect("locate")
                .iter()
                .map(|b| (b.offset, b.extent))
                .collect()
        };
        for (bi, (off, len)) in ranges.iter().enumerate() {
            let entries: Vec<(&str, &[u8])> = want
                .iter()
                .filter(|(e, _)| e.bundle_index == bi)
                .map(|(e, b)| (e.id.as_str(), b.as_slice()))
                .collect();
            unbundle(
                cob,
                &out[*off as usize..(*off + *len) as usize],
                &entries,
                &name,
            );
        }
    }
    assert!(
        smaller > 0,
        "--compress-bundles never made an output smaller"
    );
}
