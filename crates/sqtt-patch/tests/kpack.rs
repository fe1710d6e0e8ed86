//! ROCm 7 kpack packaging through the CLI: `.kpack` archives (storage `none` and
//! `zstd-per-kernel`) built here from fixture code objects are listed (`info`), extracted, and
//! instrumented (`sqtt-patch A.kpack -o B.kpack`, `--fatbin`); a kpack-split (HIPK) host binary
//! crafted from `fixtures/hosts/libfx_hip.so` is described and instrumented with its archives
//! found as the loader finds them; missing archives and bad archives fail with the file named,
//! a non-zero exit and nothing written.
//!
//! Oracle for every instrumented code object: the bare-object path (`sqtt-patch IN.co -o
//! OUT.co` with the same flags, which runs the verifier) gives the same bytes.
//!
//! The HIPK host ([`hipk_host`]) is made the way ROCm/rocm-kpack's `kpack_transform.py`
//! describes: `.hip_fatbin` becomes `SHT_NOBITS` (its old file bytes zeroed), the msgpack
//! metadata `{kernel_name, kpack_search_paths}` is written where the first bundle was (still
//! mapped by the first `PT_LOAD`; the real tool adds a `.rocm_kpack_ref` section instead), each
//! wrapper gets the magic `HIPK`, a zero pointer, its index in the reserved field, and its
//! `R_X86_64_RELATIVE` addend pointing at the metadata.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::kpack::write::{new_toc, write_toc};
use hsaco::kpack::{self, Storage};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const FLAGS: &[&str] = &["--functions", "1"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(BIN);
    c.env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX");
    for a in args {
        c.arg(a);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run sqtt-patch")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The bare-object path's output for one code object.
fn bare(dir: &Path, co: &[u8]) -> Vec<u8> {
    let i = dir.join("bare-in.co");
    let o = dir.join("bare-out.co");
    std::fs::write(&i, co).unwrap();
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&i, &"-o", &o];
    for f in FLAGS {
        args.push(f);
    }
    let r = run(&args, &[]);
    assert!(r.status.success(), "bare path: {:?}", text(&r));
    std::fs::read(&o).unwrap()
}

/// The code objects of libfx_hip.so: (wrapper index, target ID, bytes).
fn fx_objects() -> Vec<(usize, String, Vec<u8>)> {
    let host = std::fs::read(root().join("fixtures/hosts/libfx_hip.so")).unwrap();
    let (_, cos) = hsaco::container::open(&host, DEFAULT_DECOMPRESS_LIMIT).unwrap();
    cos.into_iter()
        .map(|e| {
            let t = e.id.split_once("--").unwrap().1.to_string();
            (e.bundle_index, t, e.data)
        })
        .collect()
}

/// One archive per target of libfx_hip.so under `dir/.kpack/fx_<target>.kpack`, alternating
/// storages; returns their paths.
fn fx_archives(dir: &Path) -> Vec<PathBuf> {
    let objs = fx_objects();
    let mut targets: Vec<&str> = objs.iter().map(|o| o.1.as_str()).collect();
    targets.sort();
    targets.dedup();
    std::fs::create_dir_all(dir.join(".kpack")).unwrap();
    let mut out = Vec::new();
    for (n, t) in targets.iter().enumerate() {
        let mine: Vec<&(usize, String, Vec<u8>)> = objs.iter().filter(|o| o.1 == *t).collect();
        let keys: Vec<String> = mine
            .iter()
            .map(|o| format!("lib/libfx_hip.so#{}", o.0))
            .collect();
        let entries: Vec<(&str, &str, usize)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), *t, i))
            .collect();
        let storage = if n % 2 == 0 {
            Storage::ZstdPerKernel
        } else {
            Storage::None
        };
        let toc = new_toc("fx", t, &[t], &entries);
        let blobs: Vec<&[u8]> = mine.iter().map(|o| o.2.as_slice()).collect();
        let p = dir.join(format!(".kpack/fx_{t}.kpack"));
        std::fs::write(&p, write_toc(&toc, storage, &blobs).unwrap()).unwrap();
        out.push(p);
    }
    out
}

/// libfx_hip.so made kpack-split (module documentation), with the search path
/// `../.kpack/fx_@GFXARCH@.kpack`.
fn hipk_host() -> Vec<u8> {
    let mut b = std::fs::read(root().join("fixtures/hosts/libfx_hip.so")).unwrap();
    let e = hsaco::elf::Elf::parse(&b).unwrap();
    let fat = e.section_by_name(".hip_fatbin").unwrap().clone();
    let seg = e.section_by_name(".hipFatBinSegment").unwrap().clone();
    let relas = e.relas(&b).unwrap();
    b[(fat.offset as usize)..(fat.offset + fat.size) as usize].fill(0);
    let sh = e.header.e_shoff as usize + 64 * fat.index;
    b[sh + 4..sh + 8].copy_from_slice(&8u32.to_le_bytes());
    let meta = rmpv::Value::Map(vec![
        (
            "kpack_search_paths".into(),
            rmpv::Value::Array(vec!["../.kpack/fx_@GFXARCH@.kpack".into()]),
        ),
        ("kernel_name".into(), "lib/libfx_hip.so".into()),
    ]);
    let mut m = Vec::new();
    rmpv::encode::write_value(&mut m, &meta).unwrap();
    b[fat.offset as usize..][..m.len()].copy_from_slice(&m);
    for i in 0..seg.size / 24 {
        let w = (seg.offset + 24 * i) as usize;
        b[w..w + 4].copy_from_slice(&0x4B50_4948u32.to_le_bytes());
        b[w + 8..w + 16].fill(0);
        b[w + 16..w + 24].copy_from_slice(&i.to_le_bytes());
        let r = relas
            .iter()
            .find(|r| r.r_offset == seg.addr + 24 * i + 8)
            .unwrap();
        let a = r.entry_offset as usize + 16;
        b[a..a + 8].copy_from_slice(&fat.addr.to_le_bytes());
    }
    b
}

/// A tree `lib/libfx_hip.so` (HIPK) + `.kpack/fx_<target>.kpack`.
fn hipk_tree(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let host = dir.join("lib/libfx_hip.so");
    std::fs::write(&host, hipk_host()).unwrap();
    (host, fx_archives(dir))
}

#[test]
fn archives_are_listed_extracted_and_instrumented_in_both_storages() {
    let t = tempfile::tempdir().unwrap();
    let archives = fx_archives(t.path());
    for a in &archives {
        let input = kpack::read(&std::fs::read(a).unwrap(), DEFAULT_DECOMPRESS_LIMIT).unwrap();
        let info = run(&[&"info", a], &[]);
        let (out, err) = text(&info);
        assert!(info.status.success(), "{err}");
        assert!(
            out.contains(&format!(
                "kpack archive, {} code object(s)",
                input.blobs.len()
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!("storage {}", input.storage.name())),
            "{out}"
        );
        assert!(out.contains("entry lib/libfx_hip.so#1@"), "{out}");
        let x = t.path().join("x");
        let ex = run(&[&"extract", a, &"-o", &x], &[]);
        assert!(ex.status.success(), "{:?}", text(&ex));
        for e in &input.entries {
            let f = x.join(format!(
                "{}-{}.co",
                e.ordinal,
                e.label().replace(['/', '#', '@'], "_")
            ));
            assert_eq!(
                std::fs::read(&f).unwrap(),
                input.blobs[e.ordinal],
                "{}",
                f.display()
            );
        }
        // Instrumented without --fatbin and with it: same archive; each object as the bare path.
        let o1 = t.path().join("o1.kpack");
        let o2 = t.path().join("o2.kpack");
        let r = run(&[a, &"-o", &o1, &FLAGS[0], &FLAGS[1]], &[]);
        assert!(r.status.success(), "{:?}", text(&r));
        assert!(text(&r).0.contains("instrumented"), "{:?}", text(&r));
        let r = run(&[&"--fatbin", a, &"-o", &o2, &FLAGS[0], &FLAGS[1]], &[]);
        assert!(r.status.success(), "{:?}", text(&r));
        // Each entry's line names it as a kpack entry, not a bundle (session-14 tester).
        let out = text(&r).0;
        assert!(
            out.lines().any(|l| l.starts_with("kpack entry 0 ")),
            "{out}"
        );
        assert!(!out.contains("bundle 0"), "{out}");
        let b1 = std::fs::read(&o1).unwrap();
        assert_eq!(b1, std::fs::read(&o2).unwrap());
        let out = kpack::read(&b1, DEFAULT_DECOMPRESS_LIMIT).unwrap();
        assert_eq!(out.storage, input.storage);
        assert_eq!(out.entries.len(), input.entries.len());
        for (i, blob) in input.blobs.iter().enumerate() {
            let want = bare(t.path(), blob);
            assert_ne!(&want, blob);
            assert_eq!(out.blobs[i], want, "{} blob {i}", a.display());
        }
    }
}

#[test]
fn a_hipk_host_is_described_and_instrumented_with_its_archives() {
    let t = tempfile::tempdir().unwrap();
    let (host, archives) = hipk_tree(t.path());
    let info = run(&[&"info", &host], &[]);
    let (out, err) = text(&info);
    assert!(info.status.success(), "{err}");
    assert!(out.contains("kpack-split (HIPK)"), "{out}");
    assert!(out.contains("key lib/libfx_hip.so#1"), "{out}");
    assert!(
        out.contains("search paths [\"../.kpack/fx_@GFXARCH@.kpack\"]"),
        "{out}"
    );
    for a in &archives {
        let name = a.file_name().unwrap().to_string_lossy();
        assert!(
            out.contains(&format!(
                "{name} (search path ../.kpack/fx_@GFXARCH@.kpack, gfx"
            )),
            "{out}"
        );
    }
    assert!(
        out.contains("holds [\"lib/libfx_hip.so#0\",\"lib/libfx_hip.so#1\"]"),
        "{out}"
    );
    // Commands that read one code object say what it is and where to go.
    let r = run(
        &[&host, &"-o", &t.path().join("x.co"), &"--functions", &"1"],
        &[],
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r).1.contains("not a code object: a kpack-split (HIPK) x86-64 host binary: its device code is in .kpack archives; pass --fatbin"), "{:?}", text(&r));
    let r = run(&[&"dis", &host], &[]);
    assert!(
        text(&r)
            .1
            .contains("`sqtt-patch info FILE` lists its archives"),
        "{:?}",
        text(&r)
    );
    // The old message is gone.
    let ex = run(&[&"extract", &host, &"-o", &t.path().join("x")], &[]);
    assert!(!ex.status.success());
    assert!(
        text(&ex)
            .1
            .contains("its code objects are in .kpack archives"),
        "{:?}",
        text(&ex)
    );

    let out_dir = t.path().join("out");
    std::fs::create_dir_all(out_dir.join("lib")).unwrap();
    let o = out_dir.join("lib/libfx_hip.so");
    let json = t.path().join("r.json");
    let r = run(
        &[
            &"--fatbin",
            &host,
            &"-o",
            &o,
            &"--report-json",
            &json,
            &FLAGS[0],
            &FLAGS[1],
        ],
        &[],
    );
    let (so, se) = text(&r);
    assert!(r.status.success(), "{so}{se}");
    assert_eq!(std::fs::read(&o).unwrap(), std::fs::read(&host).unwrap());
    assert_eq!(
        so.lines().filter(|l| l.contains("instrumented")).count(),
        6,
        "{so}"
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["kpack_archives"].as_array().unwrap().len(), 3, "{j}");
    for a in &archives {
        let written = out_dir.join(".kpack").join(a.file_name().unwrap());
        let before = kpack::read(&std::fs::read(a).unwrap(), DEFAULT_DECOMPRESS_LIMIT).unwrap();
        let after =
            kpack::read(&std::fs::read(&written).unwrap(), DEFAULT_DECOMPRESS_LIMIT).unwrap();
        assert_eq!(after.storage, before.storage);
        for (i, blob) in before.blobs.iter().enumerate() {
            assert_eq!(
                after.blobs[i],
                bare(t.path(), blob),
                "{} blob {i}",
                written.display()
            );
        }
    }
    // The instrumented tree describes itself the same way.
    let (out, _) = text(&run(&[&"info", &o], &[]));
    assert_eq!(
        out.matches(" holds [\"lib/libfx_hip.so#0\",\"lib/libfx_hip.so#1\"]")
            .count(),
        3,
        "{out}"
    );

    // --offload-arch: only that target's archive (feature subsets tried), written beside.
    let o3 = t.path().join("one/lib/libfx_hip.so");
    std::fs::create_dir_all(o3.parent().unwrap()).unwrap();
    let r = run(
        &[
            &"--fatbin",
            &host,
            &"-o",
            &o3,
            &"--offload-arch",
            &"gfx90a:xnack-",
            &FLAGS[0],
            &FLAGS[1],
        ],
        &[],
    );
    assert!(r.status.success(), "{:?}", text(&r));
    assert_eq!(
        text(&r)
            .0
            .lines()
            .filter(|l| l.contains("gfx90a") && l.contains("instrumented"))
            .count(),
        2,
        "{:?}",
        text(&r)
    );
    let made: Vec<String> = std::fs::read_dir(t.path().join("one/.kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(made, ["fx_gfx90a.kpack"]);

    // ROCM_KPACK_PATH: those archives only, written beside the output.
    let o4 = t.path().join("env/libfx_hip.so");
    std::fs::create_dir_all(o4.parent().unwrap()).unwrap();
    let r = run(
        &[&"--fatbin", &host, &"-o", &o4, &FLAGS[0], &FLAGS[1]],
        &[("ROCM_KPACK_PATH", &archives[1])],
    );
    assert!(r.status.success(), "{:?}", text(&r));
    assert!(t
        .path()
        .join("env")
        .join(archives[1].file_name().unwrap())
        .is_file());
    assert_eq!(std::fs::read_dir(t.path().join("env")).unwrap().count(), 2);
}

#[test]
fn a_missing_archive_is_named_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let (host, archives) = hipk_tree(t.path());
    let out = t.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let o = out.join("libfx_hip.so");
    let r = run(
        &[
            &"--fatbin",
            &host,
            &"-o",
            &o,
            &"--offload-arch",
            &"gfx942",
            &FLAGS[0],
            &FLAGS[1],
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2));
    let want = t.path().join(".kpack/fx_gfx942.kpack");
    assert!(
        text(&r).1.contains(&format!(
            "{} (search path ../.kpack/fx_@GFXARCH@.kpack, target gfx942)",
            want.display()
        )),
        "{:?}",
        text(&r)
    );
    for a in &archives {
        std::fs::remove_file(a).unwrap();
    }
    let r = run(&[&"--fatbin", &host, &"-o", &o, &FLAGS[0], &FLAGS[1]], &[]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        text(&r).1.contains(
            "for any target (search path ../.kpack/fx_@GFXARCH@.kpack; no fx_gfx*.kpack in"
        ),
        "{:?}",
        text(&r)
    );
    let r = run(
        &[&"--fatbin", &host, &"-o", &o, &FLAGS[0], &FLAGS[1]],
        &[("ROCM_KPACK_PATH", &t.path().join("nope.kpack"))],
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(
        text(&r).1.contains("nope.kpack (from ROCM_KPACK_PATH)"),
        "{:?}",
        text(&r)
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no partial output"
    );
}

/// Session-14 tester: `info` on an archive with one damaged code object stopped (exit 2) before
/// listing the others. It lists every one that loads, names the damaged one with its reason,
/// and still exits 2 (bad input), as for a bundle entry that does not load.
#[test]
fn info_lists_an_archive_with_one_damaged_code_object() {
    let t = tempfile::tempdir().unwrap();
    let objs = fx_objects();
    let target = objs[0].1.clone();
    let mine: Vec<&(usize, String, Vec<u8>)> = objs.iter().filter(|o| o.1 == target).collect();
    assert!(
        mine.len() >= 2,
        "libfx_hip.so has two code objects per target"
    );
    let keys: Vec<String> = (0..mine.len()).map(|i| format!("lib/x.so#{i}")).collect();
    let entries: Vec<(&str, &str, usize)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), target.as_str(), i))
        .collect();
    let mut damaged = mine[0].2.clone();
    damaged[7] = 0; // EI_OSABI: not ELFOSABI_AMDGPU_HSA
    let mut blobs: Vec<&[u8]> = mine.iter().map(|o| o.2.as_slice()).collect();
    blobs[0] = &damaged;
    let toc = new_toc("fx", &target, &[&target], &entries);
    let p = t.path().join("one-bad.kpack");
    std::fs::write(&p, write_toc(&toc, Storage::None, &blobs).unwrap()).unwrap();
    let r = run(&[&"info", &p], &[]);
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(2), "{out}{err}");
    assert!(
        out.contains(&format!(
            "kpack archive, {} code object(s), 1 entry that does not load",
            mine.len() - 1
        )),
        "{out}"
    );
    assert!(out.contains("error: kpack entry 0 (code object "), "{out}");
    assert!(
        err.contains("the code objects that load are listed"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_archives_fail_with_the_file_and_offset_and_write_nothing() {
    let t = tempfile::tempdir().unwrap();
    let a = fx_archives(t.path()).remove(0);
    let good = std::fs::read(&a).unwrap();
    let toc = u64::from_le_bytes(good[8..16].try_into().unwrap());
    let mut past = good.clone();
    past[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "truncated",
            good[..12].to_vec(),
            "kpack header needs 16 bytes at offset 0x0".into(),
        ),
        (
            "magic",
            [b"KPAK".as_slice(), &good[4..]]
                .concat()
                .iter()
                .enumerate()
                .map(|(i, b)| if i == 3 { b'X' } else { *b })
                .collect(),
            String::new(),
        ),
        (
            "past",
            past,
            "malformed kpack header at offset 0x8: TOC offset 0x10000000000".into(),
        ),
        (
            "toc",
            good[..toc as usize + 3].to_vec(),
            format!("malformed kpack table of contents at offset {toc:#x}: msgpack"),
        ),
    ];
    for (what, bytes, want) in cases {
        let p = t.path().join(format!("{what}.kpack"));
        std::fs::write(&p, &bytes).unwrap();
        let o = t.path().join(format!("{what}-out.kpack"));
        for args in [
            vec![
                &p as &dyn AsRef<std::ffi::OsStr>,
                &"-o",
                &o,
                &"--functions",
                &"1",
            ],
            vec![&"--fatbin", &p, &"-o", &o, &"--functions", &"1"],
            vec![&"info", &p],
        ] {
            let r = run(&args, &[]);
            let (_, err) = text(&r);
            assert_eq!(r.status.code(), Some(2), "{what}: {err}");
            assert!(
                err.contains(&p.display().to_string()) && err.contains(&want),
                "{what}: {err}"
            );
            assert!(!err.contains("panicked"), "{what}: {err}");
        }
        assert!(!o.exists(), "{what}: output written");
    }
}

/// A HIPK binary whose metadata is not the documented msgpack map, or whose wrapper points
/// outside the file: `info` and `--fatbin` name the file and the offset, exit 2, write nothing.
#[test]
fn bad_hipk_metadata_is_named_with_its_offset() {
    let t = tempfile::tempdir().unwrap();
    let good = hipk_host();
    let e = hsaco::elf::Elf::parse(&good).unwrap();
    let meta = e.section_by_name(".hip_fatbin").unwrap().offset as usize;
    let seg = e.section_by_name(".hipFatBinSegment").unwrap().clone();
    let rela = e
        .relas(&good)
        .unwrap()
        .into_iter()
        .find(|r| r.r_offset == seg.addr + 8)
        .unwrap();
    let mut not_map = good.clone();
    not_map[meta] = 0xc3; // msgpack `true`
    let mut outside = good.clone();
    let a = rela.entry_offset as usize + 16;
    outside[a..a + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let cases = [
        ("not-map", not_map, format!("malformed HIPK metadata at offset {meta:#x}: no string `kernel_name` in true")),
        ("outside", outside, format!("malformed HIPK wrapper at offset {:#x}: metadata pointer 0x10000000000 is not inside the file", seg.offset + 8)),
    ];
    for (what, bytes, want) in cases {
        let p = t.path().join(format!("{what}.so"));
        std::fs::write(&p, bytes).unwrap();
        let o = t.path().join(format!("{what}-out.so"));
        for args in [
            vec![&"info" as &dyn AsRef<std::ffi::OsStr>, &p],
            vec![&"--fatbin", &p, &"-o", &o, &"--functions", &"1"],
        ] {
            let r = run(&args, &[]);
            let (_, err) = text(&r);
            assert_eq!(r.status.code(), Some(2), "{what}: {err}");
            assert!(
                err.contains(&format!("{}: {want}", p.display())),
                "{what}: {err}"
            );
        }
        assert!(!o.exists(), "{what}: output written");
    }
}
