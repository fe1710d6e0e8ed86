//! Issue 32, item 12: offload bundle entry ids are names a loader matches on; an id that is not
//! UTF-8, or the same id on two entries, is refused with the entry and the offset named (it was
//! silently dropped or passed). Bundles are written here by hand in the layout
//! `clang-offload-bundler` documents (magic, count, then offset/size/id-length/id per entry).

fn bundle(ids: &[&[u8]]) -> Vec<u8> {
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    let header: usize = 32 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
    for (i, id) in ids.iter().enumerate() {
        b.extend_from_slice(&((header + 4 * i) as u64).to_le_bytes());
        b.extend_from_slice(&4u64.to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id);
    }
    for _ in ids {
        b.extend_from_slice(b"\0\0\0\0");
    }
    b
}

#[test]
fn ids_must_be_utf8_and_distinct() {
    let good = bundle(&[
        b"host-x86_64-unknown-linux-gnu-",
        b"hipv4-amdgcn-amd-amdhsa--gfx942",
    ]);
    let parsed = hsaco::bundle::parse_plain(&good, 0).expect("a good bundle parses");
    assert_eq!(parsed.entries.len(), 2);
    let bad = bundle(&[
        b"host-x86_64-unknown-linux-gnu-",
        b"hipv4-amdgcn-amd-amdhsa--gfx\xff",
    ]);
    let e = hsaco::bundle::parse_plain(&bad, 0x100)
        .unwrap_err()
        .to_string();
    assert!(e.contains("entry 1: its id is not UTF-8"), "{e}");
    assert!(e.contains("0x"), "names the offset: {e}");
    let twice = bundle(&[
        b"hipv4-amdgcn-amd-amdhsa--gfx942",
        b"hipv4-amdgcn-amd-amdhsa--gfx942",
    ]);
    let e = hsaco::bundle::parse_plain(&twice, 0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("entry 1 has the id hipv4-amdgcn-amd-amdhsa--gfx942 of entry 0"),
        "{e}"
    );
}

/// Session-20 fresh tester: an entry whose id is malformed was dropped like an entry of
/// another target. Well-formed ids of other targets (SPIR-V, x86-64 OpenMP) stay silent; a
/// malformed id, or any non-AMDGPU id on an AMDGPU code object, is named with the reason.
#[test]
fn malformed_ids_are_told_from_other_targets() {
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[18..20].copy_from_slice(&224u16.to_le_bytes());
    let problem = hsaco::bundle::entry_id_problem;
    for id in [
        "host-x86_64-unknown-linux-gnu-",
        "hipv4-amdgcn-amd-amdhsa--gfx942",
        "hip-spirv64-amd-amdhsa--amdgcnspirv",
        "openmp-x86_64-pc-linux-gnu",
    ] {
        assert_eq!(problem(id, b"\0\0\0\0"), None, "{id}");
    }
    assert_eq!(problem("hipv4-amdgcn-amd-amdhsa--gfx942", &elf), None);
    let named = |id: &str, data: &[u8], why: &str| {
        let p = problem(id, data).unwrap_or_else(|| panic!("{id:?} is malformed"));
        assert!(p.contains(why), "{id:?}: {p}");
    };
    named(
        "hipv4-amdXcn-amd-amdhsa--gfx942",
        &elf,
        "names the target amdXcn-amd-amdhsa but the entry is an AMDGPU code object",
    );
    named(
        "hipv4-amd\u{1}cn-amd-amdhsa--gfx942",
        b"",
        "not printable ASCII",
    );
    named(
        "hipv9-spirv64-amd-amdhsa--amdgcnspirv",
        b"",
        "offload kind \"hipv9\" is not one of host, hip, hipv4",
    );
    named("hip-spirv64", b"", "no <arch>-<vendor>-<os> target triple");
    named(
        "hip-spirv64--amdhsa-",
        b"",
        "no <arch>-<vendor>-<os> target triple",
    );
}

/// Session-21 fresh tester: an id holding `amdgcn-amd-amdhsa` passed the check whatever else
/// it held. An AMDGPU id is parsed now: `<kind>-amdgcn-amd-amdhsa-<env>-<processor>` with
/// `:<feature>+|-` after it, a kind clang writes for AMDGPU entries, printable ASCII only. An
/// AMDGPU entry of size 0 is named too (`entry_problem`).
#[test]
fn amdgpu_ids_are_parsed() {
    let problem = hsaco::bundle::entry_id_problem;
    for id in [
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        "hip-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        "openmp-amdgcn-amd-amdhsa--gfx1100",
        "hipv4-amdgcn-amd-amdhsa--gfx9-4-generic:xnack+",
        "hip-amdgcn-amd-amdhsa-gfx906",
    ] {
        assert_eq!(problem(id, b"\0\0\0\0"), None, "{id}");
    }
    for (id, why) in [
        ("zzz-amdgcn-amd-amdhsa--gfx90a", "offload kind \"zzz\""),
        (
            "cuda-amdgcn-amd-amdhsa--gfx90a",
            "of an AMDGPU entry is not one of hip",
        ),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90a\u{1b}[2J",
            "not printable ASCII",
        ),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90\u{e9}",
            "not printable ASCII",
        ),
        ("host-x86_64\u{0}", "not printable ASCII"),
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack*",
            "feature \"xnack*\"",
        ),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:", "feature \"\""),
        ("hipv4-amdgcn-amd-amdhsa--", "processor \"\""),
        ("hipv4-amdgcn-amd-amdhsa--GFX90A", "processor \"GFX90A\""),
        (
            "hipv4-amdgcn-amd-amdhsa-x-gfx90a",
            "not an empty environment",
        ),
    ] {
        let p = problem(id, b"").unwrap_or_else(|| panic!("{id:?} is malformed"));
        assert!(p.contains(why), "{id:?}: {p}");
    }
    let empty = hsaco::bundle::entry_problem("hipv4-amdgcn-amd-amdhsa--gfx90a", b"");
    assert!(empty.is_some_and(|p| p.contains("it is empty (0 bytes)")));
    assert_eq!(
        hsaco::bundle::entry_problem("host-x86_64-unknown-linux-gnu-", b""),
        None
    );
}
