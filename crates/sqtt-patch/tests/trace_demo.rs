//! `tools/trace_demo.py`, the writer of the synthetic captures behind the README's pictures
//! (tools/draw_pictures.sh): its path through an instrumented object follows calls into device
//! functions and returns from them, repeats loops, and leaves every scope it opens closed. The
//! object is the `calls` fixture built with -g (fixtures/src/calls.hip: chains of calls up to
//! three deep, a call inside a loop); the capture is read back by `sqtt-patch flamegraph`.

mod trace_capture;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use trace_capture::*;

fn trace_demo(args: &[&Path]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/trace_demo.py");
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .env("SQTT_PATCH", BIN)
        .output()
        .expect("run python3 tools/trace_demo.py");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Traceback"),
        "{}",
        stderr(&out)
    );
    out
}

/// Every wave's marker values, in time order, of every shaderdata file under `cap`.
fn wave_values(cap: &Path) -> Vec<Vec<u64>> {
    let mut waves = std::collections::BTreeMap::<_, Vec<(u64, u64)>>::new();
    for ui in std::fs::read_dir(cap).unwrap() {
        let ui = ui.unwrap().path();
        if !ui.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&ui).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("shaderdata_") {
                continue;
            }
            let d: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
            for r in d["records"].as_array().unwrap() {
                let r: Vec<u64> = r
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                waves
                    .entry((ui.clone(), name.clone(), r[2], r[3], r[4]))
                    .or_default()
                    .push((r[0], r[1]));
            }
        }
    }
    waves
        .into_values()
        .map(|mut w| {
            w.sort();
            w.into_iter().map(|(_, v)| v).collect()
        })
        .collect()
}

#[test]
fn the_path_follows_calls_and_loops_and_closes_every_scope() {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("calls.co");
    let ids = instrument(
        "gfx942__calls__O3-g.co",
        &co,
        &["--functions", "1", "--kernel-scopes"],
    );
    let cap = tmp.path().join("cap");
    let o = trace_demo(&[&co, &cap]);
    assert!(o.status.success(), "{}", stderr(&o));
    // One line per kernel on stderr, naming the calls followed (chain_top, chain_mid twice, each
    // with horner and tiny_affine, and tiny_rotl: 8).
    assert!(
        stderr(&o).contains("k_call_chain: 27 markers on the path; calls followed: 8"),
        "{}",
        stderr(&o)
    );

    // Stacks through the fixture's calls, as its source nests them.
    let f = run(&[
        "flamegraph",
        cap.to_str().unwrap(),
        "-o",
        tmp.path().join("f.svg").to_str().unwrap(),
        "--folded",
        "-",
    ]);
    assert!(f.status.success(), "{}", stderr(&f));
    let folded = String::from_utf8_lossy(&f.stdout).into_owned();
    for stack in [
        "k_call_chain;_Z9chain_topPKffij;_Z9chain_midPKffi;_Z6hornerPKfif ",
        "k_call_chain;_Z9chain_topPKffij;_Z9chain_midPKffi;_Z11tiny_affinef ",
        "k_call_chain;_Z9chain_topPKffij;_Z9tiny_rotljj ",
        "k_shared_a;_Z13shared_helperjj;_Z9big_mixerjj ",
        "k_shared_b;_Z13shared_helperjj;_Z9tiny_rotljj ",
        "k_call_mix;_Z16big_private_sortPKfij ",
        "k_call_chain;_ZL6fx_gidv;_ZL5fx_wgv ",
    ] {
        assert!(folded.contains(stack), "{stack} missing:\n{folded}");
    }

    // Every wave closes what it opens, never closes more, and ends at depth 0; in k_call_mix
    // the loop around big_private_sort runs three times (its back edge taken twice).
    let enter = |name: &str| u64::from(ids[name]) << 2 | 2;
    let kernel_mix = enter("k_call_mix");
    let waves = wave_values(&cap);
    assert_eq!(
        waves.len(),
        4 * 2 * 4 * 4,
        "4 kernels x 2 SEs x 4 CUs x 4 slots"
    );
    for w in &waves {
        let mut depth = 0i64;
        for &v in w {
            if v & 3 == 2 {
                depth += 1;
            } else if v == 1 {
                depth -= 1;
                assert!(depth >= 0, "{w:?}");
            }
        }
        assert_eq!(depth, 0, "{w:?}");
        if w[0] == kernel_mix {
            let sorts = enter("_Z16big_private_sortPKfij");
            // 3 wave instances per slot, each running the loop three times.
            assert_eq!(w.iter().filter(|&&v| v == sorts).count(), 3 * 3, "{w:?}");
        }
    }
}

#[test]
fn an_object_without_kernel_scopes_is_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("calls.co");
    instrument("gfx942__calls__O3-g.co", &co, &["--functions", "1"]);
    let cap = tmp.path().join("cap");
    let o = trace_demo(&[&co, &cap]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no kernel scopes in .sqtt_funcmap: instrument with --kernel-scopes"),
        "{}",
        stderr(&o)
    );
    assert!(!cap.exists());
}
