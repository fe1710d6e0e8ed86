//! Post-link SQTT instrumentation of AMDGPU code objects.
//!
//! Data flows one way: load (crate `hsaco`) → decode (crate `amdgpu-isa`) → analyse
//! ([`analysis`]) → instrument ([`plan`]) → lay out and encode ([`layout`]) → verify ([`verify`])
//! → write. The behaviour reproduced is the compile-time SQTT Instrument Pass
//! (`shared/seeds/000_df2c860dad9fe6b4.txt`).

pub mod config;
pub mod funcmap;
