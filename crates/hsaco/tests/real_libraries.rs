//! Real third-party libraries end to end (OPTIONAL large-data test, about 1.8 GB of input).
//!
//! `#[ignore]`d, so `cargo test` never passes it silently: run it with `tools/real_libraries.sh`
//! (`cargo test --release -p hsaco --test real_libraries -- --ignored --nocapture`). It reads
//! the real-library directory `$SQTT_REAL_DIR`, else `<workspace root>/target/real` (fetched by
//! `tools/fetch_real.sh`; never committed), and FAILS when a library is missing there. For PyPI
//! `onnxruntime-rocm` 1.22.2.post3
//! `libonnxruntime_providers_rocm.so` (95 bundles, 760 code objects) and Debian `librocsparse0`
//! 5.3.0+dfsg-2 `librocsparse.so.0.1` (111 bundles, 777 code objects, DWARF):
//! - every bundle entry found by `hsaco::host::find_fatbins` (bundle index, entry id, size)
//!   equals the list `llvm-objdump-22 --offloading` extracts (file `<name>.<index>.<id>`,
//!   file size), in order, and sampled entries are byte-equal to the extracted files;
//! - every code object parses, and the target ID derived from its `e_flags` equals the target
//!   part of its bundle entry id; rocsparse objects carry DWARF;
//! - wall time of both is printed (`tools/bench_containers.sh` adds peak memory).
//!
//! LLVM 22 is required (the test fails without it) unless `SQTT_NO_LLVM=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::CodeObject;

/// One library under test: path inside the real-library dir, expected counts.
struct Library {
    path: &'static str,
    bundles: usize,
    code_objects: usize,
    dwarf: bool,
}

const LIBRARIES: [Library; 2] = [
    Library {
        path: "wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so",
        bundles: 95,
        code_objects: 760,
        dwarf: false,
    },
    Library {
        path: "deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1",
        bundles: 111,
        code_objects: 777,
        dwarf: true,
    },
];

/// The real-library directory (`$SQTT_REAL_DIR`, else `<workspace root>/target/real`, as
/// `tools/fetch_real.sh` fills it); panics naming every library missing from it.
fn real_dir() -> PathBuf {
    let dir = match std::env::var_os("SQTT_REAL_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/real"),
    };
    let missing: Vec<String> = LIBRARIES
        .iter()
        .map(|l| dir.join(l.path))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "real_libraries needs the real libraries (run tools/fetch_real.sh, which fills \
         $SQTT_REAL_DIR or <workspace>/target/real); missing: {}",
        missing.join(", ")
    );
    dir
}

/// (bundle index, entry id, entry size in bytes) as listed by `llvm-objdump-22 --offloading`,
/// which extracts each entry to `<file name>.<bundle index>.<id>` in its working directory.
///
/// llvm-objdump writes the files next to the path it is given, so it is run on a symbolic link
/// inside `work`, never on the library's own directory.
fn objdump_entries(lib: &Path, work: &Path) -> Vec<(usize, String, u64)> {
    let name = lib.file_name().expect("file name");
    std::os::unix::fs::symlink(lib, work.join(name)).expect("symlink");
    let out = Command::new(common::llvm_tool("llvm-objdump"))
        .arg("--offloading")
        .arg(name)
        .current_dir(work)
        .output()
        .expect("run llvm-objdump-22");
    assert!(
        out.status.success(),
        "llvm-objdump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = name.to_string_lossy();
    let prefix = format!("Extracting offload bundle: {name}.");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let (index, id) = rest.split_once('.').expect("<index>.<id>");
            let file = work.join(format!("{name}.{rest}"));
            let size = std::fs::metadata(&file).expect("extracted file").len();
            (index.parse().expect("bundle index"), id.to_string(), size)
        })
        .collect()
}

#[test]
#[ignore = "needs about 1.8 GB of third-party libraries: run tools/real_libraries.sh"]
fn real_libraries_match_llvm_objdump_offloading() {
    let dir = real_dir();
    if common::no_llvm() {
        eprintln!("skipped: SQTT_NO_LLVM=1 (this test compares with llvm-objdump-22)");
        return;
    }
    for lib in &LIBRARIES {
        let path = dir.join(lib.path);
        let t0 = Instant::now();
        let data = std::fs::read(&path).expect("read library");
        let fatbins = hsaco::host::find_fatbins(&data, DEFAULT_DECOMPRESS_LIMIT).expect("host");
        let ours: Vec<(usize, String, u64)> = fatbins
            .iter()
            .enumerate()
            .flat_map(|(bi, f)| {
                f.bundle
                    .entries
                    .iter()
                    .map(move |e| (bi, e.id.clone(), e.data.len() as u64))
            })
            .collect();
        let listed = t0.elapsed();
        // Every code object parses; its e_flags target equals the entry's target.
        let mut objects = 0;
        let mut kernels = 0;
        for e in fatbins.iter().flat_map(|f| &f.bundle.entries) {
            if !e.is_amdgcn() {
                continue;
            }
            let co = CodeObject::parse(&e.data)
                .unwrap_or_else(|err| panic!("{}: {}: {err}", lib.path, e.id));
            assert_eq!(
                Some(co.target.target_id().as_str()),
                e.target_id(),
                "{}: {}",
                lib.path,
                e.id
            );
            assert_eq!(co.has_dwarf(), lib.dwarf, "{}: {}", lib.path, e.id);
            objects += 1;
            kernels += co.kernels.len();
        }
        let parsed = t0.elapsed();
        assert_eq!(fatbins.len(), lib.bundles, "{}", lib.path);
        assert_eq!(objects, lib.code_objects, "{}", lib.path);

        let work = tempfile::tempdir().expect("tempdir");
        let t1 = Instant::now();
        let theirs = objdump_entries(&path, work.path());
        let objdump = t1.elapsed();
        assert_eq!(ours.len(), theirs.len(), "{}: entry count", lib.path);
        assert_eq!(ours, theirs, "{}: entry lists differ", lib.path);
        // Byte equality of every 37th entry with the extracted file.
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let all: Vec<(usize, &hsaco::bundle::BundleEntry)> = fatbins
            .iter()
            .enumerate()
            .flat_map(|(bi, f)| f.bundle.entries.iter().map(move |e| (bi, e)))
            .collect();
        for (bi, e) in all.iter().step_by(37) {
            let f = work.path().join(format!("{name}.{bi}.{}", e.id));
            assert!(
                std::fs::read(&f).expect("extracted") == e.data,
                "{}: {bi} {} differs from llvm-objdump's extraction",
                lib.path,
                e.id
            );
        }
        println!(
            "{}: {} bundles, {} entries, {objects} code objects, {kernels} kernels; hsaco list {:.2} s, \
             list+parse {:.2} s (this test's build profile); llvm-objdump-22 --offloading {:.2} s",
            lib.path,
            fatbins.len(),
            ours.len(),
            listed.as_secs_f64(),
            parsed.as_secs_f64(),
            objdump.as_secs_f64()
        );
    }
}
