//! Which processors have the `xnack` and `sramecc` target features, checked against an oracle
//! nobody here wrote: clang-22's target-ID parser, which accepts `-mcpu=<processor>:xnack+`
//! only for processors with the feature ("invalid target ID" otherwise). A code object for any
//! other processor must hold 0 in that `e_flags` field; `CodeObject::input_warnings` names one
//! that does not (the session-22 fresh tester's `xnack` on gfx1100).

use hsaco::Target;
use std::process::Command;

/// Whether clang-22's driver accepts `-mcpu=<target_id>` (`-###`: it checks the target ID and
/// prints the commands it would run, running none; the input is an empty file in `dir`).
fn clang_accepts(dir: &std::path::Path, target_id: &str) -> bool {
    let src = dir.join("empty.s");
    std::fs::write(&src, "").expect("write empty.s");
    Command::new("clang-22")
        .args(["--target=amdgcn-amd-amdhsa", "-###", "-c"])
        .arg(format!("-mcpu={target_id}"))
        .arg(&src)
        .arg("-o")
        .arg(dir.join("empty.o"))
        .output()
        .expect("clang-22 (LLVM 22) is needed: tools/setup.sh")
        .status
        .success()
}

#[test]
fn feature_support_matches_clang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for mach in 0u32..=0xff {
        let Ok(t) = Target::from_e_flags(mach) else {
            continue;
        };
        // LLVM 22 dropped gfx940 and gfx941 (MI300 pre-production): they follow gfx942.
        let oracle = if matches!(t.processor.as_str(), "gfx940" | "gfx941") {
            "gfx942"
        } else {
            t.processor.as_str()
        };
        assert!(clang_accepts(dir.path(), oracle), "clang-22 knows {oracle}");
        assert!(
            !clang_accepts(dir.path(), &format!("{oracle}:bogus+")),
            "the oracle refuses"
        );
        for (feature, ours) in [
            ("xnack", t.supports_xnack()),
            ("sramecc", t.supports_sramecc()),
        ] {
            let theirs = clang_accepts(dir.path(), &format!("{oracle}:{feature}+"));
            assert_eq!(ours, theirs, "{}: {feature}", t.processor);
        }
        checked += 1;
    }
    assert!(checked >= 50, "{checked} processors");
}
