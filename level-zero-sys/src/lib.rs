//! Level Zero FFI for xpushmem: the types, DDI tables and entry points a SHMEM runtime uses, with API 1.4 as
//! the floor (Debian 12's `libze1` 1.8.12 loader).
//!
//! * [`types`]: opaque handle newtypes (`ze_*_handle_t`), [`ze_result_t`](types::ze_result_t) (a newtype whose
//!   `Display` prints the C name), enumerations, flag constants and the descriptor / properties structures
//!   (every one with `stype` + `pNext`; `Default` sets the right `stype`).
//! * [`api`]: the `ze_pfn*_t` function pointer types and [`ZeApi`], the loader's entry points resolved at run
//!   time with `libloading` from `libze_loader.so.1` (then `libze_loader.so`). Entry points newer than 1.4
//!   (`zeMemPutIpcHandle`, `zeCommandListHostSynchronize`) are `Option`s.
//! * [`ddi`]: the driver DDI tables (`ze_*_dditable_t`) a driver fills in its `zeGet*ProcAddrTable` exports.
//!
//! This is a `-sys` crate: no logic beyond the loader.
//!
//! ```no_run
//! use level_zero_sys::{ZeApi, ZE_INIT_FLAG_GPU_ONLY};
//! let ze = ZeApi::load().expect("Level Zero loader");
//! // SAFETY: zeInit has no pointer arguments.
//! let r = unsafe { (ze.zeInit)(ZE_INIT_FLAG_GPU_ONLY) };
//! println!("zeInit: {r}");
//! ```
#![warn(missing_docs)]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

pub mod api;
pub mod ddi;
pub mod types;

pub use api::*;
pub use api::{LoadError, ZeApi};
pub use ddi::*;
pub use types::*;
