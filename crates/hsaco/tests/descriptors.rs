//! Kernel descriptor decoding against llvm-objdump-22's `.amdhsa_*` directives, for every kernel
//! of every bare code object of the corpus; kernel/function counts against MANIFEST.tsv.

mod common;

use std::collections::BTreeMap;

use hsaco::{CodeObject, KernelDescriptor};

/// Parses `llvm-objdump -d -j .rodata` output into kernel name -> directive -> value.
fn objdump_directives(text: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, BTreeMap<String, u64>)> = None;
    for line in text.lines() {
        let l = line.trim();
        if let Some(name) = l.strip_prefix(".amdhsa_kernel ") {
            cur = Some((name.to_string(), BTreeMap::new()));
        } else if l == ".end_amdhsa_kernel" {
            if let Some((n, m)) = cur.take() {
                out.insert(n, m);
            }
        } else if let (Some((_, m)), Some(rest)) = (cur.as_mut(), l.strip_prefix(".amdhsa_")) {
            let mut it = rest.split_whitespace();
            let (Some(k), Some(v)) = (it.next(), it.next()) else {
                continue;
            };
            let v = v
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("non-numeric directive {l}"));
            m.insert(k.to_string(), v);
        }
    }
    out
}

#[test]
fn descriptors_match_llvm_objdump_for_every_kernel() {
    if common::no_llvm() {
        return;
    }
    let mut kernels = 0;
    let mut fields = 0;
    let mut skipped = 0;
    for path in common::bare_objects() {
        let bytes = std::fs::read(&path).expect("read");
        let co = CodeObject::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (ok, stdout, stderr) = common::run(
            "llvm-objdump",
            &[
                "-d".as_ref(),
                "-j".as_ref(),
                ".rodata".as_ref(),
                path.as_os_str(),
            ],
        );
        assert!(ok, "{}: llvm-objdump failed: {stderr}", path.display());
        let want = objdump_directives(&stdout);
        // llvm-objdump 22 refuses some descriptors ("error decoding X.kd: kernel descriptor must be
        // 64-byte aligned") when .rodata continues past them: those are counted, not compared.
        let refused: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("; error decoding ")?.split(".kd:").next())
            .collect();
        assert_eq!(
            want.len() + refused.len(),
            co.kernels.len(),
            "{}: kernel count",
            path.display()
        );
        skipped += refused.len();
        for k in co
            .kernels
            .iter()
            .filter(|k| !refused.contains(&k.name.as_str()))
        {
            let w = want
                .get(&k.name)
                .unwrap_or_else(|| panic!("{}: objdump has no kernel {}", path.display(), k.name));
            let got: BTreeMap<String, u64> = k
                .descriptor
                .directives(&co.target, co.version)
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect();
            let diff: Vec<String> = got
                .keys()
                .chain(w.keys())
                .filter(|key| got.get(*key) != w.get(*key))
                .map(|key| format!("{key}: ours {:?} objdump {:?}", got.get(key), w.get(key)))
                .collect();
            assert!(
                diff.is_empty(),
                "{}: kernel {} directives differ: {diff:?}",
                path.display(),
                k.name
            );
            // Bit-exact encode.
            let raw = &bytes[k.kd_offset as usize..k.kd_offset as usize + 64];
            assert_eq!(k.descriptor.encode().as_slice(), raw);
            assert_eq!(
                KernelDescriptor::decode(raw, 0).expect("decode"),
                k.descriptor
            );
            kernels += 1;
            fields += got.len();
        }
    }
    assert!(kernels > 500, "only {kernels} kernels checked");
    assert!(
        skipped * 10 < kernels,
        "objdump refused {skipped} descriptors"
    );
    eprintln!("checked {kernels} kernels, {fields} directive values; objdump refused {skipped}");
}

#[test]
fn counts_match_manifest() {
    let c = common::corpus();
    let mut checked = 0;
    for row in common::manifest()
        .iter()
        .filter(|r| r["kind"] == "code-object")
    {
        let bytes = std::fs::read(c.join(&row["path"])).expect("read");
        let co = CodeObject::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", row["path"]));
        assert_eq!(
            co.kernels.len().to_string(),
            row["kernels"],
            "{} kernels",
            row["path"]
        );
        let devfuncs = co.functions.iter().filter(|f| f.size > 0).count();
        assert_eq!(
            devfuncs.to_string(),
            row["device_funcs"],
            "{} device functions",
            row["path"]
        );
        assert_eq!(
            format!("v{}", co.version.number()),
            row["cov"],
            "{} cov",
            row["path"]
        );
        let wave32 = co.kernels.iter().filter(|k| k.descriptor.wave32()).count();
        assert_eq!(
            wave32.to_string(),
            row["wave32_kernels"],
            "{} wave32",
            row["path"]
        );
        let preload = co
            .kernels
            .iter()
            .filter(|k| k.descriptor.kernarg_preload_length() > 0)
            .count();
        assert_eq!(
            preload.to_string(),
            row["kernarg_preload_kernels"],
            "{} preload",
            row["path"]
        );
        let dyn_stack = co
            .kernels
            .iter()
            .filter(|k| k.descriptor.uses_dynamic_stack())
            .count();
        assert_eq!(
            dyn_stack.to_string(),
            row["dyn_stack_kernels"],
            "{} dynamic stack",
            row["path"]
        );
        assert_eq!(
            co.has_dwarf(),
            row["dwarf_objs"] == "1",
            "{} dwarf",
            row["path"]
        );
        assert!(
            row["targets"].starts_with(&co.target.processor),
            "{} target",
            row["path"]
        );
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} objects");
}
