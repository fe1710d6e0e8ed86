//! Post-link SQTT instrumentation of AMDGPU code objects.
//!
//! Data flows one way: load (crate `hsaco`) → decode (crate `amdgpu-isa`) → analyse
//! ([`analysis`]) → instrument ([`plan`]) → lay out ([`layout`]) → encode → write; each stage
//! from load to encode is one module of `pipeline`, called in order by [`rewrite`], and fills
//! the report types of [`report`] (the stages import it; it imports neither them nor the
//! driver); the
//! independent verifier (crate `sqtt-verify`) checks every output. The behaviour
//! reproduced is the compile-time SQTT Instrument Pass (its specification: `docs/markers/SPEC.md` of rocprof-trace-decoder, ROCm/rocm-systems).

pub mod analysis;
pub mod callers;
mod calltable;
pub mod config;
pub mod consteval;
mod idiom;
pub mod inlined;
pub mod insts;
pub mod layout;
pub mod loops;
mod noreturn;
mod pipeline;
pub mod plan;
pub mod regions;
pub mod regs;
pub mod reguse;
pub mod report;
pub mod rewrite;
pub mod snippets;
mod subroutines;
pub mod timings;
pub mod trace;
pub mod undecodable;
pub mod verbatim;
