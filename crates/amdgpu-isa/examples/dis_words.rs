//! Decodes hex dwords for a target and prints our text, length, LLVM opcode name, and the
//! registers read and written. A `+t16` suffix on the target selects real-true16 mode.
//! Usage: `cargo run -p amdgpu-isa --example dis_words -- gfx942 dc508000 00000002`.
fn main() {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: dis_words <target> <hex dword>...");
        std::process::exit(2);
    };
    let (name, t16) = match name.strip_suffix("+t16") {
        Some(n) => (n.to_string(), true),
        None => (name, false),
    };
    let Some(t) =
        amdgpu_isa::Target::from_name(&name).map(|t| if t16 { t.with_true16(true) } else { t })
    else {
        eprintln!("unknown target {name}");
        std::process::exit(2);
    };
    let mut bytes = Vec::new();
    for a in args {
        match u32::from_str_radix(a.trim_start_matches("0x"), 16) {
            Ok(w) => bytes.extend_from_slice(&w.to_le_bytes()),
            Err(e) => {
                eprintln!("{a}: {e}");
                std::process::exit(2);
            }
        }
    }
    let mut off = 0;
    while off < bytes.len() {
        match amdgpu_isa::decode(&bytes[off..], t) {
            Ok(i) => {
                let regs = |s: amdgpu_isa::RegSet| format!("{:?}", s.iter().collect::<Vec<_>>());
                println!(
                    "{}\t{} bytes\t{}\treads {}\twrites {}",
                    i,
                    i.len(),
                    i.llvm_opcode_name(),
                    regs(i.reads()),
                    regs(i.writes())
                );
                off += i.len();
            }
            Err(e) => {
                println!("error at {off:#x}: {e}");
                break;
            }
        }
    }
}
