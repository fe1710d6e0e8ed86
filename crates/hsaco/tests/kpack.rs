//! `.kpack` archives: archives built here (storage `none` and `zstd-per-kernel`) read back to
//! the same code objects and TOC fields, rewrite byte-identically, and every class of bad input
//! is a typed error naming the offset (truncated header, bad magic, TOC offset past the end,
//! blob or frame ranges past their bounds, a compression bomb), never a panic.

use std::path::PathBuf;

use hsaco::kpack::write::{new_toc, write, write_toc};
use hsaco::kpack::{self, Storage};
use rmpv::Value;

const LIMIT: u64 = hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Two code objects of two targets for one binary key, and the first again under a second key.
fn sample(storage: Storage) -> (Vec<u8>, Vec<Vec<u8>>) {
    let blobs = vec![
        fixture("gfx942__barriers__O3.co"),
        fixture("gfx1100__calls__O3.co"),
    ];
    let toc = new_toc(
        "test",
        "gfx9-11",
        &["gfx942", "gfx1100"],
        &[
            ("lib/libfx.so#0", "gfx942", 0),
            ("lib/libfx.so#0", "gfx1100", 1),
            ("lib/libfx.so#1", "gfx942", 0),
        ],
    );
    (write_toc(&toc, storage, &blobs).expect("write"), blobs)
}

fn err(data: &[u8]) -> String {
    kpack::read(data, LIMIT).expect_err("must fail").to_string()
}

#[test]
fn built_archives_read_back_and_rewrite_identically() {
    for storage in [Storage::None, Storage::ZstdPerKernel] {
        let (bytes, blobs) = sample(storage);
        let a = kpack::read(&bytes, LIMIT).expect("read");
        assert_eq!(a.storage, storage);
        assert_eq!(a.version, 1);
        assert_eq!(a.blobs, blobs);
        assert_eq!(a.field_str("group_name"), Some("test"));
        assert_eq!(a.field_str("compression_scheme"), Some(storage.name()));
        assert_eq!(a.gfx_arches(), vec!["gfx942", "gfx1100"]);
        let labels: Vec<String> = a.entries.iter().map(|e| e.label()).collect();
        assert_eq!(
            labels,
            [
                "lib/libfx.so#0@gfx942",
                "lib/libfx.so#0@gfx1100",
                "lib/libfx.so#1@gfx942"
            ]
        );
        assert_eq!(
            a.find("lib/libfx.so#1", "gfx942").map(|e| e.ordinal),
            Some(0)
        );
        assert_eq!(
            a.entries[1].original_size,
            Some(blobs[1].len() as u64),
            "original_size written"
        );
        // Header: magic, version 1, TOC offset; plain blobs on 64-byte boundaries.
        assert_eq!(&bytes[..8], b"KPAK\x01\x00\x00\x00");
        assert_eq!(
            u64::from_le_bytes(bytes[8..16].try_into().unwrap()),
            a.toc_offset
        );
        if storage == Storage::None {
            let offs: Vec<u64> = match kpack_field(&a.toc, "blobs") {
                Value::Array(v) => v
                    .iter()
                    .map(|b| kpack_field(b, "offset").as_u64().unwrap())
                    .collect(),
                v => panic!("blobs {v}"),
            };
            assert!(offs.iter().all(|o| o % 64 == 0), "{offs:?}");
            assert_eq!(&bytes[offs[1] as usize..][..4], b"\x7fELF");
        }
        // Unchanged blobs rewrite to the same bytes; changed ones round-trip.
        assert_eq!(write(&a, &a.blobs).expect("rewrite"), bytes);
        let mut changed = a.blobs.clone();
        changed[1].extend_from_slice(&[0xAB; 100]);
        let b = kpack::read(&write(&a, &changed).expect("write"), LIMIT).expect("reread");
        assert_eq!(b.blobs, changed);
        assert_eq!(b.entries[1].original_size, Some(changed[1].len() as u64));
        assert_eq!(
            b.toc_offset > a.toc_offset,
            storage == Storage::None || b.stored_sizes[1] > a.stored_sizes[1]
        );
        // Every prefix fails cleanly (the TOC is at the end).
        for n in (0..bytes.len()).step_by(211) {
            assert!(kpack::read(&bytes[..n], LIMIT).is_err(), "prefix {n}");
        }
    }
}

fn kpack_field<'a>(map: &'a Value, key: &str) -> &'a Value {
    map.as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(key)))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key}"))
}

#[test]
fn header_errors_name_the_offset() {
    let (bytes, _) = sample(Storage::None);
    assert_eq!(
        err(&bytes[..10]),
        "truncated input: kpack header needs 16 bytes at offset 0x0, but the data is 10 bytes long"
    );
    let mut b = bytes.clone();
    b[..4].copy_from_slice(b"KPAC");
    assert_eq!(
        err(&b),
        "malformed kpack header at offset 0x0: magic [4b, 50, 41, 43] is not \"KPAK\""
    );
    let mut b = bytes.clone();
    b[4] = 2;
    assert_eq!(
        err(&b),
        "malformed kpack header at offset 0x4: format version 2 (only 1 is known)"
    );
    let mut b = bytes.clone();
    b[8..16].copy_from_slice(&(bytes.len() as u64 + 5).to_le_bytes());
    assert_eq!(
        err(&b),
        format!(
            "malformed kpack header at offset 0x8: TOC offset {:#x} is not between the header end (0x10) and the end of the file ({:#x})",
            bytes.len() + 5,
            bytes.len()
        )
    );
    let mut b = bytes.clone();
    b[8..16].copy_from_slice(&64u64.to_le_bytes());
    assert_eq!(
        err(&b),
        "malformed kpack table of contents at offset 0x40: not a msgpack map"
    );
}

/// Rewrites one TOC and keeps the rest of the archive.
fn with_toc(bytes: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let a = kpack::read(bytes, LIMIT).expect("read");
    let mut toc = a.toc.clone();
    edit(&mut toc);
    let mut out = bytes[..a.toc_offset as usize].to_vec();
    rmpv::encode::write_value(&mut out, &toc).expect("encode");
    out
}

fn set(map: &mut Value, key: &str, v: Value) {
    if let Value::Map(m) = map {
        for (k, old) in m.iter_mut() {
            if k.as_str() == Some(key) {
                *old = v;
                return;
            }
        }
        m.push((Value::from(key), v));
    }
}

#[test]
fn toc_ranges_past_their_bounds_are_refused() {
    let (bytes, _) = sample(Storage::None);
    let toc_offset = kpack::read(&bytes, LIMIT).unwrap().toc_offset;
    let b = with_toc(&bytes, |t| {
        set(
            t,
            "blobs",
            Value::Array(vec![Value::Map(vec![
                (Value::from("offset"), Value::from(64u64)),
                (Value::from("size"), Value::from(1u64 << 40)),
            ])]),
        )
    });
    assert_eq!(
        err(&b),
        format!("malformed kpack blob at offset 0x40: blob 0: range 0x40+0x10000000000 is not between the header end (0x10) and the TOC offset ({toc_offset:#x})")
    );
    let b = with_toc(&bytes, |t| set(t, "compression_scheme", Value::from("lz4")));
    assert_eq!(
        err(&b),
        format!("malformed kpack table of contents at offset {toc_offset:#x}: unknown compression_scheme \"lz4\"")
    );
    let b = with_toc(&bytes, |t| {
        set(t, "blobs", Value::Array(vec![]));
    });
    assert!(
        err(&b).contains("ordinal 0 is past the 0 blob(s)"),
        "{}",
        err(&b)
    );

    let (z, _) = sample(Storage::ZstdPerKernel);
    let zt = kpack::read(&z, LIMIT).unwrap().toc_offset;
    let b = with_toc(&z, |t| set(t, "zstd_size", Value::from(zt)));
    assert_eq!(
        err(&b),
        format!("malformed kpack zstd blob at offset 0x40: range 0x40+{zt:#x} is not between the header end (0x10) and the TOC offset ({zt:#x})")
    );
    // A frame size running past the zstd blob.
    let mut b = z.clone();
    b[68..72].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(err(&b).starts_with("malformed kpack zstd frame at offset 0x44: frame 0 of 4294967295 bytes runs past the zstd blob end"), "{}", err(&b));
    // A frame count that cannot fit.
    let mut b = z.clone();
    b[64..68].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(
        err(&b)
            .starts_with("malformed kpack zstd blob at offset 0x40: 4294967295 frames cannot fit"),
        "{}",
        err(&b)
    );
}

/// 64 MiB of zeros in one small frame: refused when its declared size is beyond what the frame
/// may expand to, and when it expands past the decompression limit; read with a limit above it.
#[test]
fn compression_bombs_are_refused_within_the_limits() {
    let zeros = vec![0u8; 64 << 20];
    let toc = new_toc(
        "bomb",
        "gfx942",
        &["gfx942"],
        &[("lib/x.so#0", "gfx942", 0)],
    );
    let bytes = write_toc(&toc, Storage::ZstdPerKernel, &[&zeros]).expect("write");
    assert!(
        bytes.len() < 64 << 10,
        "the frame is small: {}",
        bytes.len()
    );
    let e = kpack::read(&bytes, 1 << 20)
        .expect_err("past the limit")
        .to_string();
    assert!(
        e.starts_with("malformed kpack zstd frame at offset 0x48: original_size 67108864 bytes is more than the"),
        "{e}"
    );
    let stripped = with_toc(&bytes, |t| {
        if let Value::Map(m) = t {
            for (k, v) in m.iter_mut() {
                if k.as_str() == Some("toc") {
                    *v = new_toc("", "", &[], &[("lib/x.so#0", "gfx942", 0)])
                        .as_map()
                        .unwrap()
                        .iter()
                        .find(|(k, _)| k.as_str() == Some("toc"))
                        .unwrap()
                        .1
                        .clone();
                }
            }
        }
    });
    let e = kpack::read(&stripped, 1 << 20)
        .expect_err("past the limit")
        .to_string();
    assert_eq!(e, "malformed kpack zstd frame at offset 0x48: decompresses to more than 1048576 bytes (the bound; limit 1048576 bytes left, 32768:1 at most)");
    // A declared size that lies.
    let liar = with_toc(&bytes, |t| {
        let Some(Value::Map(bins)) = t
            .as_map()
            .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some("toc")))
            .map(|(_, v)| v.clone())
        else {
            panic!()
        };
        let mut bins = Value::Map(bins);
        if let Value::Map(b) = &mut bins {
            if let Value::Map(a) = &mut b[0].1 {
                set(&mut a[0].1, "original_size", Value::from(1000u64));
            }
        }
        set(t, "toc", bins);
    });
    let e = kpack::read(&liar, LIMIT).expect_err("liar").to_string();
    assert_eq!(e, "malformed kpack zstd frame at offset 0x48: decompresses to more than 1000 bytes (its original_size; limit 4294967296 bytes left, 32768:1 at most)");
    let a = kpack::read(&bytes, 128 << 20).expect("within the limit");
    assert_eq!(a.blobs[0].len(), 64 << 20);
}

/// Flipping any byte of a built archive gives an archive or an error, never a panic.
#[test]
fn corrupted_bytes_never_panic() {
    for storage in [Storage::None, Storage::ZstdPerKernel] {
        let (bytes, _) = sample(storage);
        let step = (bytes.len() / 3000).max(1);
        for i in (0..bytes.len()).step_by(step) {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = kpack::read(&b, 1 << 24);
        }
    }
}

/// The loader's rules (rocm-kpack `isa_target_match.h`, `loader.cpp`): feature subsets most
/// specific first, dropping from the right first; search paths against the binary's directory.
#[test]
fn target_subsets_and_search_paths_follow_the_loader() {
    use hsaco::kpack::hipk::{compatible_targets, parse_metadata, resolve};
    use std::path::Path;
    assert_eq!(
        compatible_targets("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"),
        [
            "gfx942:sramecc+:xnack-",
            "gfx942:sramecc+",
            "gfx942:xnack-",
            "gfx942"
        ]
    );
    assert_eq!(compatible_targets("gfx1201"), ["gfx1201"]);
    assert_eq!(
        resolve(
            Path::new("/opt/r/lib/librocfft.so"),
            "../.kpack/fft_@GFXARCH@.kpack"
        ),
        Path::new("/opt/r/.kpack/fft_@GFXARCH@.kpack")
    );
    assert_eq!(
        resolve(Path::new("lib/a.so"), "../../x.kpack"),
        Path::new("../x.kpack")
    );
    assert_eq!(
        resolve(Path::new("/a.so"), "../../x.kpack"),
        Path::new("/x.kpack")
    );
    assert_eq!(
        resolve(Path::new("lib/a.so"), "/abs/./x.kpack"),
        Path::new("/abs/x.kpack")
    );

    let mut m = Vec::new();
    let v = Value::Map(vec![
        ("kernel_name".into(), "lib/a.so".into()),
        (
            "kpack_search_paths".into(),
            Value::Array(vec!["../.kpack/a_@GFXARCH@.kpack".into()]),
        ),
    ]);
    rmpv::encode::write_value(&mut m, &v).unwrap();
    assert_eq!(
        parse_metadata(&m, 0x1000).unwrap(),
        (
            "lib/a.so".to_string(),
            vec!["../.kpack/a_@GFXARCH@.kpack".to_string()]
        )
    );
    assert_eq!(
        parse_metadata(&m[..5], 0x1000).unwrap_err().to_string(),
        "malformed HIPK metadata at offset 0x1000: msgpack: I/O error while reading non-marker bytes: Expected 11 bytes, read 3 bytes"
    );
    let mut e = Vec::new();
    rmpv::encode::write_value(
        &mut e,
        &Value::Map(vec![
            ("kernel_name".into(), "x".into()),
            ("kpack_search_paths".into(), Value::Array(vec![])),
        ]),
    )
    .unwrap();
    assert_eq!(
        parse_metadata(&e, 8).unwrap_err().to_string(),
        "malformed HIPK metadata at offset 0x8: `kpack_search_paths` is empty"
    );
}

/// Runs `zstd` (the reference implementation, an oracle independent of ruzstd) on `input`.
fn zstd_cli(args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut c = std::process::Command::new("zstd")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("zstd not found: tools/setup.sh installs it");
    c.stdin.take().unwrap().write_all(input).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "zstd {args:?}");
    o.stdout
}

/// Frames we write decompress with the reference `zstd`; an archive whose frames `zstd -3`
/// made (as the reference writer's level) reads back to the original code objects.
#[test]
fn zstd_frames_agree_with_the_reference_zstd() {
    let (bytes, blobs) = sample(Storage::ZstdPerKernel);
    let a = kpack::read(&bytes, LIMIT).unwrap();
    let mut at = 64 + 4;
    for (i, b) in blobs.iter().enumerate() {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(n as u64, a.stored_sizes[i]);
        assert_eq!(
            &zstd_cli(&["-d", "-c"], &bytes[at + 4..at + 4 + n]),
            b,
            "frame {i}"
        );
        at += 4 + n;
    }
    let frames: Vec<Vec<u8>> = blobs.iter().map(|b| zstd_cli(&["-3", "-c"], b)).collect();
    let mut out = b"KPAK\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec();
    out.resize(64, 0);
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for f in &frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    let mut toc = a.toc.clone();
    set(&mut toc, "zstd_size", Value::from(out.len() as u64 - 64));
    let toc_offset = out.len() as u64;
    rmpv::encode::write_value(&mut out, &toc).unwrap();
    out[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    let r = kpack::read(&out, LIMIT).expect("reference frames");
    assert_eq!(r.blobs, blobs);
}
