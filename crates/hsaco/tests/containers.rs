//! Bundles, CCOB and host ELFs: counts against MANIFEST.tsv, round trips accepted by
//! clang-offload-bundler-22 with byte-equal entries.

mod common;

use hsaco::bundle::{self, Method};
use hsaco::container::{open, InputKind};
use hsaco::CodeObject;

#[test]
fn every_container_yields_the_manifest_code_objects() {
    let c = common::corpus();
    let mut n = 0;
    for row in common::manifest()
        .iter()
        .filter(|r| r["kind"] != "code-object")
    {
        let bytes = std::fs::read(c.join(&row["path"])).expect("read");
        let (kind, cos) = open(&bytes, bundle::DEFAULT_DECOMPRESS_LIMIT)
            .unwrap_or_else(|e| panic!("{}: {e}", row["path"]));
        assert_eq!(
            cos.len().to_string(),
            row["n_code_objects"],
            "{}",
            row["path"]
        );
        let kernels: usize = cos
            .iter()
            .map(|e| {
                CodeObject::parse(&e.data)
                    .expect("code object")
                    .kernels
                    .len()
            })
            .sum();
        assert_eq!(
            kernels.to_string(),
            row["kernels"],
            "{} kernels",
            row["path"]
        );
        match row["kind"].as_str() {
            "bundle-file" => assert_eq!(kind, InputKind::Bundle),
            _ => assert_eq!(kind, InputKind::Host),
        }
        let n_bundles = cos
            .iter()
            .map(|e| e.bundle_index)
            .max()
            .map_or(0, |m| m + 1);
        if let Some(count) = row["containers"].split('*').nth(1) {
            assert_eq!(n_bundles.to_string(), count, "{} bundles", row["path"]);
        }
        n += 1;
    }
    assert!(n >= 14, "only {n} containers");
}

#[test]
fn ccob_round_trip_is_accepted_by_clang_offload_bundler() {
    let c = common::corpus();
    let plain = std::fs::read(c.join("bundles/multi4__hip-mini__O3.hipfb")).expect("read");
    let b = bundle::parse_plain(&plain, 0).expect("parse");
    let entries: Vec<(String, Vec<u8>)> = b
        .entries
        .iter()
        .map(|e| (e.id.clone(), e.data.clone()))
        .collect();
    let rebuilt = bundle::write_plain(&entries);
    assert_eq!(
        bundle::parse_plain(&rebuilt, 0).expect("reparse").entries,
        b.entries
    );
    assert!(
        rebuilt == plain,
        "rebuilt plain bundle differs from clang's"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for version in [1u16, 2, 3] {
        for method in [Method::Zlib, Method::Zstd] {
            let ccob = bundle::write_ccob(&rebuilt, version, method).expect("compress");
            let back =
                bundle::parse_one(&ccob, 0, bundle::DEFAULT_DECOMPRESS_LIMIT).expect("decompress");
            assert_eq!(back.entries, b.entries);
            if common::no_llvm() {
                continue;
            }
            let p = dir.path().join(format!("v{version}-{method:?}.ccob"));
            std::fs::write(&p, &ccob).expect("write");
            let input = format!("-input={}", p.display());
            let (ok, list, err) = common::run(
                "clang-offload-bundler",
                &["-list".as_ref(), "-type=o".as_ref(), input.as_ref()],
            );
            assert!(ok, "v{version} {method:?}: {err}");
            for e in &b.entries {
                assert!(
                    list.lines().any(|l| l == e.id),
                    "v{version} {method:?}: id {} not listed",
                    e.id
                );
            }
            for e in b.entries.iter().filter(|e| e.is_amdgcn()) {
                let out = dir.path().join("entry.co");
                let (ok, _, err) = common::run(
                    "clang-offload-bundler",
                    &[
                        "-unbundle".as_ref(),
                        "-type=o".as_ref(),
                        input.as_ref(),
                        format!("-targets={}", e.id).as_ref(),
                        format!("-output={}", out.display()).as_ref(),
                    ],
                );
                assert!(ok, "unbundle {}: {err}", e.id);
                assert!(
                    std::fs::read(&out).expect("read") == e.data,
                    "v{version} {method:?} {}: entry differs",
                    e.id
                );
            }
        }
    }
}

#[test]
fn lying_ccob_sizes_are_errors_not_oom() {
    let c = common::corpus();
    let ccob = std::fs::read(c.join("bundles/multi4__hip-mini__O3.ccob-v3-zstd")).expect("read");
    // Declared uncompressed size smaller than the truth.
    let mut small = ccob.clone();
    small[16..24].copy_from_slice(&1000u64.to_le_bytes());
    let e = bundle::parse_one(&small, 0, bundle::DEFAULT_DECOMPRESS_LIMIT).expect_err("lie");
    assert!(
        e.to_string().contains("declared uncompressed size 1000"),
        "{e}"
    );
    // Declared size enormous: refused before allocating.
    let mut huge = ccob.clone();
    huge[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = bundle::parse_one(&huge, 0, bundle::DEFAULT_DECOMPRESS_LIMIT).expect_err("lie");
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
    // Total size past the end.
    let mut long = ccob.clone();
    long[8..16].copy_from_slice(&(ccob.len() as u64 + 1).to_le_bytes());
    let e = bundle::parse_one(&long, 0, bundle::DEFAULT_DECOMPRESS_LIMIT).expect_err("lie");
    assert!(
        e.to_string()
            .starts_with("compressed offload bundle at offset 0x0: total size"),
        "{e}"
    );
}
