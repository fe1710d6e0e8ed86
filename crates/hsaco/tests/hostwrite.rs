//! Host ELF write-back and bundle rebuild (`hsaco::hostwrite`) against LLVM 22 oracles
//! (llvm-objdump-22 --offloading, llvm-readelf-22 -a, clang-offload-bundler-22) and by running
//! the fixture host programs (stub HIP runtime, no GPU) after their bundles moved.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use hsaco::bundle::{self, Method, Storage, DEFAULT_DECOMPRESS_LIMIT};
use hsaco::host::PointerKind;
use hsaco::hostwrite::{
    self, locate_bundles, rebuild_bundle, scan_host, write_host, BundleFormat, HostWriteMode,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every host of fixtures/hosts and corpus/hosts (linked ones: `.elf`, `.so`).
fn hosts() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in [fixtures().join("hosts"), common::corpus().join("hosts")] {
        for e in std::fs::read_dir(&d).expect("hosts dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "elf" || x == "so") {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() >= 10, "only {} hosts", v.len());
    v
}

fn tool(name: &str) -> Option<PathBuf> {
    if common::no_llvm() {
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

/// Grows every bundle: same entries plus a 5000-byte entry `hipv4-amdgcn-amd-amdhsa--gfx000x`,
/// in the bundle's own format. Returns the new bundles and their entry lists.
/// A rebuilt bundle and its entries (id, contents).
type Grown = (Vec<u8>, Vec<(String, Vec<u8>)>);

fn grown(data: &[u8], img: &hostwrite::HostImage) -> Vec<Grown> {
    img.bundles
        .iter()
        .map(|b| {
            let l = b.location;
            let src = &data[l.offset as usize..(l.offset + l.extent) as usize];
            let parsed =
                bundle::parse_one(src, l.offset, DEFAULT_DECOMPRESS_LIMIT).expect("bundle");
            let mut entries: Vec<(String, Vec<u8>)> = parsed
                .entries
                .iter()
                .map(|e| (e.id.clone(), e.data.clone()))
                .collect();
            entries.push(("hipv4-amdgcn-amd-amdhsa--gfx000x".into(), vec![0xa5; 5000]));
            let bytes =
                rebuild_bundle(&entries, &parsed.storage, BundleFormat::Keep).expect("rebuild");
            (bytes, entries)
        })
        .collect()
}

fn readelf_clean(readelf: &Path, file: &Path) {
    let o = Command::new(readelf)
        .arg("-a")
        .arg("-W")
        .arg(file)
        .output()
        .expect("llvm-readelf");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.trim().is_empty(),
        "{}: llvm-readelf -a: {err}",
        file.display()
    );
}

/// Compares llvm-objdump-22 --offloading's extraction with `want` ("<bundle>.<id>", bytes,
/// compressed?). For compressed bundles LLVM 22 extracts entry names and sizes right but copies
/// the bytes from the host file at the decompressed offsets (it does so on clang's own output
/// too), so only names and sizes are compared there; [`unbundle_all`] checks their contents.
fn objdump_matches(
    objdump: &Path,
    dir: &Path,
    file: &str,
    mut want: Vec<(String, Vec<u8>, bool)>,
    what: &str,
) {
    want.sort();
    let got = objdump_offloading(objdump, dir, file);
    assert_eq!(
        got.iter().map(|g| (&g.0, g.1.len())).collect::<Vec<_>>(),
        want.iter().map(|w| (&w.0, w.1.len())).collect::<Vec<_>>(),
        "{what}"
    );
    for (g, w) in got.iter().zip(&want) {
        assert!(w.2 || g.1 == w.1, "{what}: {} differs", g.0);
    }
}

/// clang-offload-bundler-22 -list and -unbundle of a bundle: every non-empty entry comes back
/// byte-identical.
fn unbundle_all(cob: &Path, bytes: &[u8], entries: &[(String, Vec<u8>)], what: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("b");
    std::fs::write(&f, bytes).expect("write");
    let o = Command::new(cob)
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", f.display()))
        .output()
        .expect("run");
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listed: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    for (id, d) in entries.iter().filter(|(_, d)| !d.is_empty()) {
        assert!(listed.contains(id), "{what}: {id} not listed");
        let t = dir.path().join("t");
        let o = Command::new(cob)
            .args(["-unbundle", "-type=o"])
            .arg(format!("-targets={id}"))
            .arg(format!("-input={}", f.display()))
            .arg(format!("-output={}", t.display()))
            .output()
            .expect("run");
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(std::fs::read(&t).expect("unbundled") == *d, "{what}: {id}");
    }
}

/// The bundles of a `.hip_fatbin` that llvm-objdump-22 --offloading walks: the first one, then
/// each next one found by searching for the FIRST bundle's magic (`__CLANG_OFFLOAD_BUNDLE__`
/// or `CCOB`, LLVM `extractOffloadBundle`), so a section mixing plain and compressed bundles
/// (fixtures/hosts/libfx_hip.so) shows only those of the first kind, numbered in that order.
fn llvm_visible<T: AsRef<[u8]>, E>(bundles: &[(T, E)]) -> Vec<&(T, E)> {
    let ccob = |b: &[u8]| b.starts_with(b"CCOB");
    let first = bundles.first().is_some_and(|b| ccob(b.0.as_ref()));
    bundles
        .iter()
        .filter(|b| ccob(b.0.as_ref()) == first)
        .collect()
}

/// llvm-objdump-22 --offloading in `dir` on `file`: map "<bundle>.<id>" -> bytes.
fn objdump_offloading(objdump: &Path, dir: &Path, file: &str) -> Vec<(String, Vec<u8>)> {
    let o = Command::new(objdump)
        .arg("--offloading")
        .arg(file)
        .current_dir(dir)
        .output()
        .expect("llvm-objdump");
    assert!(
        o.status.success(),
        "llvm-objdump --offloading {file}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir") {
        let p = e.expect("entry").path();
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if let Some(rest) = n.strip_prefix(&format!("{file}.")) {
            v.push((rest.to_string(), std::fs::read(&p).expect("read extracted")));
        }
    }
    v.sort();
    v
}

#[test]
fn appended_bundles_are_found_by_llvm_tools_and_keep_original_bytes() {
    let (objdump, readelf, cob) = match (
        tool("llvm-objdump"),
        tool("llvm-readelf"),
        tool("clang-offload-bundler"),
    ) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return,
    };
    for h in hosts() {
        let data = std::fs::read(&h).expect("read host");
        let img = scan_host(&data).unwrap_or_else(|e| panic!("{}: {e}", h.display()));
        assert!(!img.bundles.is_empty());
        let g = grown(&data, &img);
        let (out, mode) = write_host(
            &data,
            &img,
            g.iter().map(|(b, _)| Some(b.clone())).collect(),
        )
        .expect("write");
        let HostWriteMode::Appended {
            segment_offset,
            wrappers_repointed,
            ..
        } = mode
        else {
            panic!(
                "{}: grown bundles must be appended, got {mode:?}",
                h.display()
            );
        };
        assert_eq!(wrappers_repointed, img.wrappers.len());
        // Original bytes kept outside the header fields the writer documents.
        let mut allowed: Vec<(u64, u64)> = vec![(0x20, 8), (0x38, 2)];
        let sh = img.elf.header.e_shoff + 64 * img.fatbin_section as u64;
        allowed.push((sh + 16, 24));
        for w in &img.wrappers {
            allowed.push((w.offset + 8, 8));
            if let PointerKind::Relative { rela_entry_offset } = w.pointer {
                allowed.push((rela_entry_offset + 16, 8));
            }
        }
        for s in img.elf.symbols(&data).expect("symbols") {
            if usize::from(s.shndx) == img.fatbin_section {
                allowed.push((s.entry_offset + 8, 16));
            }
        }
        for (i, (a, b)) in data.iter().zip(&out).enumerate() {
            let i = i as u64;
            if a != b {
                assert!(
                    allowed.iter().any(|&(o, n)| i >= o && i < o + n),
                    "{}: original byte at {i:#x} changed",
                    h.display()
                );
            }
        }
        assert!(segment_offset >= data.len() as u64);
        // The rewritten file scans back to the new bundles, wrappers included.
        let img2 = scan_host(&out).unwrap_or_else(|e| panic!("{}: rescan: {e}", h.display()));
        assert_eq!(img2.bundles.len(), g.len());
        assert_eq!(img2.wrappers.len(), img.wrappers.len());
        for (w, w2) in img.wrappers.iter().zip(&img2.wrappers) {
            assert_eq!(w.bundle, w2.bundle);
        }
        for (b2, (bytes, _)) in img2.bundles.iter().zip(&g) {
            let l = b2.location;
            assert_eq!(
                &out[l.offset as usize..(l.offset + l.extent) as usize],
                &bytes[..]
            );
        }
        // LLVM oracles.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("out"), &out).expect("write");
        readelf_clean(&readelf, &dir.path().join("out"));
        let mut want = Vec::new();
        for (bytes, entries) in &g {
            unbundle_all(&cob, bytes, entries, &h.display().to_string());
        }
        for (bi, (bytes, entries)) in llvm_visible(&g).into_iter().enumerate() {
            let compressed = bytes.starts_with(b"CCOB");
            for (id, d) in entries {
                want.push((format!("{bi}.{id}"), d.clone(), compressed));
            }
        }
        objdump_matches(&objdump, dir.path(), "out", want, &h.display().to_string());
    }
}

#[test]
fn rewritten_fixture_programs_still_run_and_register_the_new_bundles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hd = fixtures().join("hosts");
    for f in [
        "libfx_hip.so",
        "x86_64__fx-app__pie.elf",
        "x86_64__fx-app__nopie.elf",
    ] {
        let data = std::fs::read(hd.join(f)).expect("read");
        let img = scan_host(&data).expect("scan");
        let g = grown(&data, &img);
        let (out, _) =
            write_host(&data, &img, g.into_iter().map(|(b, _)| Some(b)).collect()).expect("write");
        let p = dir.path().join(f);
        std::fs::write(&p, &out).expect("write");
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
        assert_eq!(
            got.lines().next(),
            want.lines().next(),
            "{exe}: registration line"
        );
        let fatbins = |s: &str| s.lines().filter(|l| l.starts_with("fatbin ")).count();
        assert_eq!(fatbins(&got), fatbins(&want), "{exe}");
        // The runtime read the NEW bundles through the repointed wrappers.
        assert!(
            got.contains("gfx000x"),
            "{exe}: new entry not seen by the runtime:\n{got}"
        );
    }
}

#[test]
fn in_place_when_the_rebuilt_bundle_fits_its_slot() {
    let (Some(objdump), Some(cob)) = (tool("llvm-objdump"), tool("clang-offload-bundler")) else {
        return;
    };
    let p = fixtures().join("hosts/x86_64__fx-app__pie.elf");
    let data = std::fs::read(&p).expect("read");
    let img = scan_host(&data).expect("scan");
    let mut new = Vec::new();
    let mut want = Vec::new();
    for (bi, b) in img.bundles.iter().enumerate() {
        let l = b.location;
        let parsed = bundle::parse_one(
            &data[l.offset as usize..(l.offset + l.slot) as usize],
            l.offset,
            DEFAULT_DECOMPRESS_LIMIT,
        )
        .expect("bundle");
        let entries: Vec<(String, Vec<u8>)> = parsed
            .entries
            .iter()
            .map(|e| (e.id.clone(), e.data.clone()))
            .collect();
        let fmt = BundleFormat::Compressed {
            version: 3,
            method: Method::Zlib,
        };
        let c = rebuild_bundle(&entries, &parsed.storage, fmt).expect("compress");
        assert!((c.len() as u64) < l.slot);
        for (id, d) in &entries {
            want.push((format!("{bi}.{id}"), d.clone(), true));
        }
        unbundle_all(&cob, &c, &entries, "in place");
        new.push(Some(c));
    }
    let (out, mode) = write_host(&data, &img, new).expect("write");
    assert_eq!(mode, HostWriteMode::InPlace);
    assert_eq!(out.len(), data.len());
    let img2 = scan_host(&out).expect("rescan");
    assert!(img2
        .bundles
        .iter()
        .all(|b| out[b.location.offset as usize..].starts_with(b"CCOB")));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("out"), &out).expect("write");
    objdump_matches(&objdump, dir.path(), "out", want, "in place");
}

#[test]
fn rebuilt_bundles_keep_format_and_are_read_by_clang_offload_bundler() {
    let Some(cob) = tool("clang-offload-bundler") else {
        return;
    };
    let mut n = 0;
    for d in [fixtures().join("bundles"), common::corpus().join("bundles")] {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            let data = std::fs::read(&p).expect("read");
            let locs = locate_bundles(&data, 0..data.len() as u64).expect("locate");
            let all = bundle::parse_all(&data, 0, DEFAULT_DECOMPRESS_LIMIT).expect("parse");
            assert_eq!(locs.len(), all.len());
            for (l, b) in locs.iter().zip(&all) {
                assert_eq!(
                    (l.offset, l.extent),
                    (b.offset, b.stored_size),
                    "{}",
                    p.display()
                );
            }
            let b = &all[0];
            let entries: Vec<(String, Vec<u8>)> = b
                .entries
                .iter()
                .map(|e| (e.id.clone(), e.data.clone()))
                .collect();
            let out = rebuild_bundle(&entries, &b.storage, BundleFormat::Keep).expect("rebuild");
            let back = bundle::parse_one(&out, 0, DEFAULT_DECOMPRESS_LIMIT).expect("reparse");
            match (&b.storage, &back.storage) {
                (Storage::Plain, Storage::Plain) => {}
                (Storage::Compressed(a), Storage::Compressed(c)) => {
                    assert_eq!(
                        (a.version, a.method),
                        (c.version, c.method),
                        "{}",
                        p.display()
                    );
                    let plain = bundle::write_plain(&entries);
                    assert_eq!(c.hash, bundle::ccob_hash(&plain));
                    assert_eq!(c.uncompressed_size, plain.len() as u64);
                }
                (x, y) => panic!("{}: storage {x:?} became {y:?}", p.display()),
            }
            unbundle_all(&cob, &out, &entries, &p.display().to_string());
            n += 1;
        }
    }
    assert!(n >= 13);
}

#[test]
fn bad_hosts_are_rejected_with_offsets() {
    let hd = fixtures().join("hosts");
    // No .hip_fatbin: rename the section in .shstrtab.
    let mut d = std::fs::read(hd.join("x86_64__fx-app__pie.elf")).expect("read");
    let i = d
        .windows(12)
        .position(|w| w == b".hip_fatbin\0")
        .expect("name");
    d[i + 10] = b'X';
    let e = scan_host(&d).expect_err("no fatbin").to_string();
    assert!(e.contains("no .hip_fatbin section"), "{e}");
    // Absolute wrapper pointer outside the file (non-PIE).
    let mut d = std::fs::read(hd.join("x86_64__fx-app__nopie.elf")).expect("read");
    let img = scan_host(&d).expect("scan");
    let w = img.wrappers[1].offset;
    d[w as usize + 8..w as usize + 16].copy_from_slice(&0x7fff_0000_0000u64.to_le_bytes());
    let e = scan_host(&d).expect_err("outside").to_string();
    assert_eq!(
        e,
        format!(
            "malformed fat binary wrapper at offset {:#x}: bundle pointer 0x7fff00000000 points outside the file (no file-backed section holds it)",
            w + 8
        )
    );
    // RELATIVE addend pointing into the middle of a bundle (PIE).
    let mut d = std::fs::read(hd.join("x86_64__fx-app__pie.elf")).expect("read");
    let img = scan_host(&d).expect("scan");
    let PointerKind::Relative { rela_entry_offset } = img.wrappers[0].pointer else {
        panic!("PIE wrapper")
    };
    let a = img.bundles[0].addr + 8;
    d[rela_entry_offset as usize + 16..rela_entry_offset as usize + 24]
        .copy_from_slice(&a.to_le_bytes());
    let e = scan_host(&d).expect_err("middle").to_string();
    assert!(
        e.contains("is not the start of a bundle in .hip_fatbin"),
        "{e}"
    );
    // Truncated bundle: an entry size past the section.
    let mut d = std::fs::read(hd.join("x86_64__fx-app__pie.elf")).expect("read");
    let img = scan_host(&d).expect("scan");
    let b = img.bundles[1].location.offset as usize;
    // Entry 1 (after the 24+8 header and entry 0 with its id) : set its size huge.
    let id0 = u64::from_le_bytes(d[b + 48..b + 56].try_into().expect("8")) as usize;
    let size1 = b + 32 + 24 + id0 + 8;
    d[size1..size1 + 8].copy_from_slice(&0x1000_0000u64.to_le_bytes());
    let e = scan_host(&d).expect_err("truncated").to_string();
    assert!(
        e.contains(".hip_fatbin (file offsets ")
            && e.contains("offload bundle entry 1 (hipv4-amdgcn-amd-amdhsa--gfx1100) at offset"),
        "{e}"
    );
    assert!(e.contains("extends past the end of the data"), "{e}");
    // Relocatable object of the new offload driver.
    let o = std::fs::read(common::corpus().join("hosts/x86_64__app-mini__4arch-newdriver-rdc.o"))
        .expect("read");
    let e = scan_host(&o).expect_err("ET_REL").to_string();
    assert!(
        e.contains("relocatable object with .llvm.offloading"),
        "{e}"
    );
}

#[test]
fn bundle_files_concatenate_at_4096_aligned_offsets() {
    let a =
        std::fs::read(fixtures().join("bundles/calls-4arch__ccob-v2-zstd.hipfb")).expect("read");
    let b = std::fs::read(fixtures().join("bundles/calls-4arch__plain.hipfb")).expect("read");
    let f = hostwrite::write_bundle_file(&[a.clone(), b.clone()]);
    let locs = locate_bundles(&f, 0..f.len() as u64).expect("locate");
    assert_eq!(locs.len(), 2);
    assert_eq!(locs[1].offset, a.len().div_ceil(4096) as u64 * 4096);
    assert_eq!(locs[0].slot, locs[1].offset);
    assert_eq!(&f[locs[1].offset as usize..], &b[..]);
    let mut t = b.clone();
    t.truncate(b.len() - 1);
    let e = locate_bundles(&t, 0..t.len() as u64)
        .expect_err("truncated")
        .to_string();
    assert!(e.contains("extends past the end of the data"), "{e}");
}

/// The streaming writer first writes a rebuilt bundle that fits into its old slot; when a later
/// one does not fit, the earlier one is read back, moved to the appended segment and its slot
/// restored. Every host with two or more bundles: bundle 0 recompressed (smaller than its slot),
/// the others grown. The output must keep every original byte outside the documented header
/// fields (slot 0 included), rescan to exactly the new bundles, satisfy llvm-readelf-22 and
/// llvm-objdump-22 --offloading, and be the same whether written into memory or into a file from
/// the input read by offset (`FileSource`).
#[test]
fn a_bundle_written_in_place_moves_when_a_later_one_does_not_fit() {
    let mut hosts_tested = 0;
    for h in hosts() {
        let data = std::fs::read(&h).expect("read host");
        let img = scan_host(&data).unwrap_or_else(|e| panic!("{}: {e}", h.display()));
        if img.bundles.len() < 2 {
            continue;
        }
        let mut g = grown(&data, &img);
        let l = img.bundles[0].location;
        let parsed = bundle::parse_one(
            &data[l.offset as usize..(l.offset + l.extent) as usize],
            l.offset,
            DEFAULT_DECOMPRESS_LIMIT,
        )
        .expect("bundle 0");
        let entries: Vec<(String, Vec<u8>)> = parsed
            .entries
            .iter()
            .map(|e| (e.id.clone(), e.data.clone()))
            .collect();
        let fmt = BundleFormat::Compressed {
            version: 3,
            method: Method::Zlib,
        };
        let small = rebuild_bundle(&entries, &parsed.storage, fmt).expect("compress");
        if small.len() as u64 >= l.slot {
            continue;
        }
        g[0] = (small, entries);
        let new: Vec<Option<Vec<u8>>> = g.iter().map(|(b, _)| Some(b.clone())).collect();
        let (out, mode) = write_host(&data, &img, new.clone()).expect("write");
        assert!(
            matches!(mode, HostWriteMode::Appended { .. }),
            "{}: {mode:?}",
            h.display()
        );
        // Same bytes through a real file (the writer reads bundle 0 back from it).
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        // The input read by offset from its file, as `--fatbin` reads it.
        let src = hsaco::source::FileSource::open(&h).expect("input file");
        assert!(scan_host(&src).expect("scan the file") == img);
        let mut w = hostwrite::HostWriter::new(&src, &img, file).expect("writer");
        for n in &new {
            w.push(n.as_deref()).expect("push");
        }
        let (_, mode2) = w.finish().expect("finish");
        assert_eq!(mode2, mode);
        assert!(std::fs::read(&path).expect("read back") == out);
        // Original bytes kept, slot 0 included.
        let mut allowed: Vec<(u64, u64)> = vec![(0x20, 8), (0x38, 2)];
        allowed.push((
            img.elf.header.e_shoff + 64 * img.fatbin_section as u64 + 16,
            24,
        ));
        for w in &img.wrappers {
            allowed.push((w.offset + 8, 8));
            if let PointerKind::Relative { rela_entry_offset } = w.pointer {
                allowed.push((rela_entry_offset + 16, 8));
            }
        }
        for s in img.elf.symbols(&data).expect("symbols") {
            if usize::from(s.shndx) == img.fatbin_section {
                allowed.push((s.entry_offset + 8, 16));
            }
        }
        for (i, (a, b)) in data.iter().zip(&out).enumerate() {
            let i = i as u64;
            assert!(
                a == b || allowed.iter().any(|&(o, n)| i >= o && i < o + n),
                "{}: original byte at {i:#x} changed",
                h.display()
            );
        }
        let img2 = scan_host(&out).unwrap_or_else(|e| panic!("{}: rescan: {e}", h.display()));
        assert_eq!(img2.bundles.len(), g.len());
        for (b2, (bytes, _)) in img2.bundles.iter().zip(&g) {
            let l = b2.location;
            assert!(out[l.offset as usize..(l.offset + l.extent) as usize] == bytes[..]);
        }
        if let (Some(objdump), Some(readelf)) = (tool("llvm-objdump"), tool("llvm-readelf")) {
            readelf_clean(&readelf, &path);
            let mut want = Vec::new();
            for (bi, (bytes, entries)) in llvm_visible(&g).into_iter().enumerate() {
                let compressed = bytes.starts_with(b"CCOB");
                for (id, d) in entries {
                    want.push((format!("{bi}.{id}"), d.clone(), compressed));
                }
            }
            objdump_matches(&objdump, dir.path(), "out", want, &h.display().to_string());
        }
        hosts_tested += 1;
    }
    assert!(hosts_tested >= 1, "no host with two bundles");
}
