//! The platform layer's operating-system side: the only code of the runtime (with `hal/`, and the transport leaves
//! phase 2 moves here: memfd, vmem, fd exchange) that holds `unsafe` blocks, each with its `SAFETY` comment.

pub(crate) mod bytes;
