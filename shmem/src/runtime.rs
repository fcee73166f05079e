//! The runtime's public paths of old (`xpushmem::runtime::*`): the PE handle [`Shmem`] (its engine is in `core`),
//! the entry points and their arguments (`init.rs`), and the job's node layout [`Nodes`] (`job.rs`).

pub use crate::core::Shmem;
pub use crate::init::{
    get_unique_id, init, init_attr, init_single, init_thread, BootstrapSpec, InitAttr,
};
pub use crate::job::Nodes;
