//! `hsaco`: reading and writing AMDGPU HSA code objects (v4/v5/v6), kernel descriptors, the
//! metadata note, offload bundles (plain and compressed), the HIP fat binaries of host ELFs and
//! LLVM offload binaries (`.llvm.offloading`), and (read only) those of Windows PE images.
//!
//! Entry points: [`CodeObject::parse`], [`CodeObjectEditor`], [`bundle`], [`host`], [`hostwrite`],
//! [`container::open`].

pub mod bundle;
pub mod codeobject;
pub mod compressed;
pub mod container;
pub mod editor;
pub mod elf;
pub mod error;
pub mod host;
pub mod hostptr;
pub mod hostwrite;
pub mod kd;
pub mod kpack;
pub mod metadata;
pub mod oddities;
pub mod offload;
pub mod pe;
mod sections;
pub mod source;
pub mod target;

pub use codeobject::{ClassifiedSymbol, CodeObject, DeviceFunction, Kernel, SymbolKind};
pub use editor::{CodeObjectEditor, Layout, Placement};
pub use error::{Error, Result};
pub use kd::{KernelDescriptor, Occupancy, RegisterCounts};
pub use metadata::Metadata;
pub use target::{CodeObjectVersion, FeatureSetting, Generation, Target};
