//! The platform layer's operating-system side: with `hal/` and `net/`, the only code of the runtime that holds
//! `unsafe` blocks, each with its `SAFETY` comment. Everything here wraps the operating system behind safe, checked
//! types: heap memfds and their mappings ([`memfd`]), byte copies ([`copy`]), address-space placement ([`vmem`]),
//! the executable's data segment ([`dataseg`]), the node's fd exchange ([`fdx`]), pidfd watching ([`pidwatch`]) and
//! work at process exit ([`exit`]).

pub(crate) mod bytes;
pub(crate) mod copy;
pub mod dataseg;
pub(crate) mod exit;
pub mod fdx;
pub(crate) mod memfd;
pub(crate) mod pidwatch;
#[cfg(xpushmem_pmix)]
pub(crate) mod pmix;
pub mod vmem;
