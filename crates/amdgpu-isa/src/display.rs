//! LLVM-syntax text of instructions (goal: identical to `llvm-objdump-22 -d`).
use crate::decode::Instruction;

impl std::fmt::Display for Instruction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mnemonic())
    }
}
