//! Networks (platform layer): the libfabric engine ([`ofi`]), built when `fabric-sys` found libfabric. Only this
//! folder names `fabric_sys`.

#[cfg(xpushmem_fabric)]
pub(crate) mod ofi;
