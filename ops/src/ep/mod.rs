//! Expert-parallel MoE dispatch and combine (PyTorch's `torch.distributed._token_switch.TokenSwitch`, DeepEP's
//! normal mode): [`TokenSwitch`] on the host path. The routing rules are the pure functions of [`route`];
//! `docs/EP.md` describes the semantics and the protocol.

pub mod device;
pub mod route;
pub mod switch;

pub use device::DeviceRouting;
pub use route::Layout;
pub use switch::{EpConfig, RouteShape, Routing, TokenSwitch};
