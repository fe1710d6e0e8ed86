//! `SQTT_INSTRUMENT_MEMORY=N:M` chunking on code assembled by llvm-mc-22, including the seed
//! spec's own example (N=2, M=5: load load store load load load → 4 markers: loads 1-2, store 3,
//! loads 4-5, load 6).

use sqtt_rewrite::analysis::{analyse, FnSpec};
use sqtt_rewrite::config::MemoryChunking;
use sqtt_rewrite::plan::memory_chunks;
use std::process::Command;

fn assemble(mcpu: &str, asm: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.s");
    let obj = dir.path().join("a.o");
    let bin = dir.path().join("a.bin");
    std::fs::write(&src, asm).unwrap();
    let ok = Command::new("/usr/lib/llvm-22/bin/llvm-mc")
        .args([
            "-arch=amdgcn",
            &format!("-mcpu={mcpu}"),
            "-filetype=obj",
            "-o",
        ])
        .arg(&obj)
        .arg(&src)
        .status()
        .expect("llvm-mc-22 (apt-get install llvm-22)")
        .success();
    assert!(ok, "llvm-mc failed");
    let ok = Command::new("/usr/lib/llvm-22/bin/llvm-objcopy")
        .args(["-O", "binary", "--only-section=.text"])
        .arg(&obj)
        .arg(&bin)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::read(bin).unwrap()
}

fn chunks(mcpu: &str, asm: &str, n: u32, m: u32) -> Vec<(usize, bool)> {
    let code = assemble(mcpu, asm);
    let target = amdgpu_isa::Target::from_name(mcpu).unwrap();
    let spec = FnSpec {
        name: "f".into(),
        start: 0x1000,
        end: 0x1000 + code.len() as u64,
        kernel: None,
    };
    let prog = analyse(target, &code, 0x1000, vec![spec]);
    assert!(
        prog.funcs[0].problems.is_empty(),
        "{:?}",
        prog.funcs[0].problems
    );
    memory_chunks(
        &prog.funcs[0],
        MemoryChunking {
            ops_per_marker: n,
            max_gap: m,
        },
    )
}

#[test]
fn spec_example_gfx1100() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let asm = "global_load_b32 v1, v[2:3], off\n\
               global_load_b32 v4, v[2:3], off\n\
               global_store_b32 v[2:3], v1, off\n\
               global_load_b32 v5, v[2:3], off\n\
               buffer_load_b32 v6, off, s[4:7], 0\n\
               flat_load_b32 v7, v[2:3]\n\
               s_setpc_b64 s[30:31]\n";
    // Indices: 0 L, 1 L, 2 S, 3 L, 4 L(buffer), 5 L(flat), 6 return.
    assert_eq!(
        chunks("gfx1100", asm, 2, 5),
        vec![(0, false), (2, true), (3, false), (5, false)]
    );
    // N=3: the load run 3..5 is one chunk.
    assert_eq!(
        chunks("gfx1100", asm, 3, 5),
        vec![(0, false), (2, true), (3, false)]
    );
}

#[test]
fn gaps_atomics_lds_and_scratch_gfx942() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let asm = "global_load_dword v1, v[2:3], off\n\
               v_add_u32 v1, v1, v1\n\
               v_add_u32 v1, v1, v1\n\
               global_load_dword v4, v[2:3], off\n\
               ds_read_b32 v5, v6\n\
               scratch_load_dword v7, off, s0\n\
               global_atomic_add v[2:3], v1, off\n\
               global_store_dword v[2:3], v1, off\n\
               s_setpc_b64 s[30:31]\n";
    // Gap 2 > M=1 breaks the load sequence; LDS and scratch are not counted (but count as gap);
    // the atomic is a store and chunks with the following store.
    assert_eq!(
        chunks("gfx942", asm, 4, 1),
        vec![(0, false), (3, false), (6, true)]
    );
    // With M=2 the two loads chain.
    assert_eq!(chunks("gfx942", asm, 4, 2), vec![(0, false), (6, true)]);
}
