//! The device facade: this PE's device as seen through the runtime ([`Device`]): SPIR-V modules, kernels and
//! launches on symmetric buffers (`kernel`), work enqueued without waiting ([`queue`]), and where the device
//! library is ([`library`]).
//!
//! The device heaps themselves are set up by the transport layer (`transport/ze.rs`), and every Level Zero call,
//! raw device memory access and kernel launch is in the Level Zero layer (`hal/ze`); this module validates
//! arguments against the heap and holds no `unsafe` block (its `unsafe fn`s are contracts its callers take on).

mod kernel;
pub mod library;
pub mod onqueue;
pub mod queue;

use crate::abi::{self, DeviceCall, DeviceError, DeviceState, ScratchLayout};
use crate::error::{Error, Result};
use crate::hal::ze::{ExternalHandles, StateGlobal, ZeEvent, ZeKernel, ZeModule, ZeRuntime};
use crate::runtime::Shmem;
use crate::types::{SymRef, SymSlice, Symmetric};
use std::sync::Arc;
use std::time::Duration;

pub use crate::types::HeapKind;

/// A kernel argument: a PE's symmetric buffer (resolved to the address this PE's device uses for it), or a
/// scalar.
#[derive(Debug, Clone, Copy)]
pub enum KernelArg {
    /// `bytes` bytes at heap offset `off` of `pe`'s heap.
    Heap {
        /// Heap offset.
        off: usize,
        /// Extent in bytes (validated against the heap).
        bytes: usize,
        /// Whose heap.
        pe: usize,
    },
    /// A 32-bit scalar.
    U32(u32),
    /// A 64-bit scalar.
    U64(u64),
    /// A 32-bit float.
    F32(f32),
}

impl KernelArg {
    /// `pe`'s copy of a symmetric slice.
    pub fn sym<T: Symmetric>(s: SymSlice<T>, pe: usize) -> KernelArg {
        KernelArg::Heap {
            off: s.heap_offset(),
            bytes: s.size_bytes(),
            pe,
        }
    }

    /// `pe`'s copy of a symmetric element.
    pub fn sym_ref<T: Symmetric>(r: SymRef<T>, pe: usize) -> KernelArg {
        Self::sym(r.as_slice(), pe)
    }
}

/// A SPIR-V module loaded on this PE's device.
#[derive(Debug)]
pub struct Module {
    pub(crate) handle: ZeModule,
    pub(crate) state: Option<StateGlobal>,
    /// Kernels that call a device wait or barrier (see [`waiting_kernels`]).
    pub(crate) waiting: std::collections::HashSet<String>,
}

/// Name of the device library's back-off step (`noinline`): every device wait, barrier and collective that has
/// to spin calls it, so a kernel whose call graph reaches it may wait on other work-groups.
pub const BACKOFF_SYMBOL: &str = "xpushmem_device_backoff";

/// The entry points of a SPIR-V module whose call graph reaches the device library's [`BACKOFF_SYMBOL`] (by its
/// `OpName`, also when a linker suffixed it): the kernels that wait, whose work-groups must all be resident.
/// Empty for a module that is not valid SPIR-V (the driver rejects it anyway).
pub fn waiting_kernels(spirv: &[u8]) -> std::collections::HashSet<String> {
    use std::collections::{HashMap, HashSet};
    const MAGIC: u32 = 0x0723_0203;
    let mut words: Vec<u32> = spirv
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words.first() == Some(&MAGIC.swap_bytes()) {
        words.iter_mut().for_each(|w| *w = w.swap_bytes());
    }
    if words.len() < 5 || words[0] != MAGIC {
        return HashSet::new();
    }
    let string = |ws: &[u32]| -> String {
        let bytes: Vec<u8> = ws.iter().flat_map(|w| w.to_le_bytes()).collect();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    };
    let (mut names, mut entries) = (HashMap::new(), Vec::new());
    let mut calls: HashMap<u32, Vec<u32>> = HashMap::new();
    let (mut current, mut at) = (None, 5);
    while at < words.len() {
        let (count, op) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        let Some(ins) = words.get(at..at + count.max(1)) else {
            break;
        };
        match (op, ins.len()) {
            (5, 3..) => {
                names.insert(ins[1], string(&ins[2..])); // OpName
            }
            (15, 4..) => entries.push((ins[2], string(&ins[3..]))), // OpEntryPoint
            (54, 3..) => current = Some(ins[2]),                    // OpFunction
            (56, _) => current = None,                              // OpFunctionEnd
            (57, 4..) => {
                if let Some(f) = current {
                    calls.entry(f).or_default().push(ins[3]); // OpFunctionCall
                }
            }
            _ => {}
        }
        at += count.max(1);
    }
    let is_backoff = |id: &u32| {
        names
            .get(id)
            .is_some_and(|n: &String| n.split('.').next() == Some(BACKOFF_SYMBOL))
    };
    entries
        .into_iter()
        .filter(|(f, _)| {
            let (mut seen, mut todo) = (HashSet::new(), vec![*f]);
            while let Some(g) = todo.pop() {
                if is_backoff(&g) {
                    return true;
                }
                if seen.insert(g) {
                    todo.extend(calls.get(&g).into_iter().flatten().copied());
                }
            }
            false
        })
        .map(|(_, name)| name)
        .collect()
}

/// A kernel of a loaded module.
#[derive(Debug)]
pub struct Kernel {
    pub(crate) handle: ZeKernel,
    pub(crate) name: String,
    pub(crate) state: Option<StateGlobal>,
    pub(crate) waits: bool,
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the kernel calls a device wait, barrier or collective of the device library (its launches are then
    /// cooperative, and refused beyond [`Device::max_resident_groups`]).
    pub fn waits(&self) -> bool {
        self.waits
    }
}

/// This PE's device, as seen through the runtime: modules, kernels, launches on symmetric buffers.
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    pub(crate) sh: &'a Shmem,
    pub(crate) rt: &'a Arc<ZeRuntime>,
}

/// Polls of a device-side wait for a host timeout (`None`: no limit).
fn timeout_polls(limit: Option<Duration>) -> u64 {
    limit.map_or(u64::MAX, |d| {
        (d.as_millis() as u64)
            .max(1)
            .saturating_mul(abi::XPUSHMEM_DEVICE_POLLS_PER_MS)
    })
}

impl<'a> Device<'a> {
    pub(crate) fn new(sh: &'a Shmem, rt: &'a Arc<ZeRuntime>) -> Self {
        Device { sh, rt }
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        self.rt.name()
    }

    /// Whether host-initiated copies run on a dedicated copy engine.
    pub fn has_copy_engine(&self) -> bool {
        self.rt.has_copy_engine()
    }

    /// The Level Zero handles in use (to share with a framework).
    pub fn handles(&self) -> ExternalHandles {
        self.rt.handles()
    }

    /// Where the device library's words lie in this PE's heap tail.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new(self.sh.n_pes(), self.sh.config().device_team_slots())
    }

    /// The device state this PE's modules get: PEs, heap bases, the team table and barrier counters (in the heap's
    /// scratch tail, kept up to date by team creation and destruction), the wait bound.
    pub fn device_state(&self) -> DeviceState {
        let (me, n) = (self.sh.my_pe(), self.sh.n_pes());
        let base = self.sh.local_map().base() as u64;
        // The heap's reserve does not change as the heap grows, and the part mapped so far is a word of the scratch
        // tail that device calls read (`heap_mapped`), so a module initialised before a growth (Triton's, a C
        // caller's) stays valid and still refuses what is not mapped yet.
        let size = self.sh.heap_max() as u64;
        let l = self.scratch_layout();
        let tail_off = self.sh.peers.scratch_offset().unwrap_or(size as usize) as u64;
        let tail = base + tail_off;
        DeviceState {
            magic: abi::XPUSHMEM_DEVICE_STATE_MAGIC,
            abi_version: abi::XPUSHMEM_DEVICE_ABI_VERSION,
            my_pe: me as i32,
            n_pes: n as i32,
            heap_size: size,
            bases: tail + l.bases as u64,
            my_base: base,
            scratch_offset: tail_off + l.arrive as u64,
            timeout_polls: timeout_polls(self.sh.config().timeout),
            n_teams: self.sh.config().device_team_slots() as i32,
            reserved: 0,
            teams: tail + l.teams as u64,
            epoch: tail + l.epoch as u64,
            error: 0,
            error_call: 0,
            error_arg: 0,
            proxy: self.sh.peers.proxy_ring(),
            heap_mapped: tail + l.mapped as u64,
            team_range: tail + l.team as u64,
            reduce_scratch: tail + l.reduce as u64,
        }
    }

    /// The first error a device call of an initialised module recorded, cleared as it is read: a wait that gave
    /// up is [`Error::Timeout`] naming the call.
    pub(crate) fn take_device_error(&self, state: Option<StateGlobal>, kernel: &str) -> Result<()> {
        let Some(state) = state else {
            return Ok(());
        };
        let Some(words) = self.rt.take_state_error(state)? else {
            return Ok(());
        };
        let code = u32::from_ne_bytes(words[0..4].try_into().expect("4 bytes"));
        let call =
            DeviceCall::from_raw(u32::from_ne_bytes(words[4..8].try_into().expect("4 bytes")));
        let arg = i64::from_ne_bytes(words[8..16].try_into().expect("8 bytes"));
        let limit = self.sh.config().timeout.unwrap_or(Duration::MAX);
        let error = DeviceError::from_raw(code);
        if error == DeviceError::Timeout {
            // A device wait cannot see a mapped peer die; the host can: a dead peer is the kernel's error, not the
            // timeout it caused.
            if let Err(e @ Error::PeerLost { .. }) =
                self.sh.check_peers(&format!("{call} in kernel {kernel}"))
            {
                return Err(e);
            }
        }
        Err(match error {
            DeviceError::Timeout => Error::Timeout {
                op: format!("{call} in kernel {kernel}"),
                waited: limit,
                limit,
                detail: format!("; the device-side wait on address {arg:#x} gave up"),
            },
            DeviceError::NotInitialized => Error::State(format!(
                "{call} in kernel {kernel} ran before the module's device state was set (Device::init_module)"
            )),
            DeviceError::Remote => match self.sh.peers.take_proxy_failure() {
                Some(Error::PeerLost { pe, me, op }) => Error::PeerLost {
                    pe,
                    me,
                    op: format!("{call} in kernel {kernel}, through the host proxy: {op}"),
                },
                Some(e) => Error::Device(format!(
                    "{call} in kernel {kernel}: the host proxy failed a request to PE {arg}: {e}"
                )),
                None => Error::Device(format!(
                    "{call} in kernel {kernel}: the host proxy failed a request to PE {arg}"
                )),
            },
            DeviceError::BadTeam => Error::Device(format!(
                "{call} in kernel {kernel}: team {arg} is not a team of this PE on the device (valid numbers are \
                 Team::device_id() of a live team of this PE, 0..{}; destroyed teams, teams this PE is not a \
                 member of and teams made from an explicit PE list are refused)",
                self.sh.config().device_team_slots()
            )),
            e => Error::Device(format!("{call} in kernel {kernel} failed: {e:?} (argument {arg})")),
        })
    }

    pub(crate) fn raw_args(
        &self,
        kernel: &Kernel,
        args: &[KernelArg],
        groups: [u32; 3],
        group_size: [u32; 3],
    ) -> Result<Vec<Vec<u8>>> {
        if groups.contains(&0) || group_size.contains(&0) {
            return Err(Error::invalid(
                "groups/group_size",
                format!("{groups:?}/{group_size:?}"),
                "every dimension must be at least 1",
            ));
        }
        let call = format!("launch {}", kernel.name);
        args.iter()
            .map(|a| {
                Ok(match *a {
                    KernelArg::Heap { off, bytes, pe } => {
                        self.sh.check_range(off, bytes, &call)?;
                        let w = self.sh.map_of(pe, &call)?;
                        (w.base() as u64 + off as u64).to_ne_bytes().to_vec()
                    }
                    KernelArg::U32(v) => v.to_ne_bytes().to_vec(),
                    KernelArg::U64(v) => v.to_ne_bytes().to_vec(),
                    KernelArg::F32(v) => v.to_ne_bytes().to_vec(),
                })
            })
            .collect()
    }
}

/// A device operation in flight (from [`Device::launch_async`]).
#[must_use = "a device event should be waited for"]
#[derive(Debug)]
pub struct DeviceEvent<'a> {
    pub(crate) dev: Device<'a>,
    pub(crate) ev: ZeEvent,
    pub(crate) state: Option<StateGlobal>,
    pub(crate) kernel: String,
}

impl DeviceEvent<'_> {
    /// Whether the operation has completed (never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        self.ev.is_complete()
    }

    /// Wait for completion, with the runtime's back-off, timeout and lost-peer detection; then, as
    /// [`Device::launch`], report an error a device call recorded.
    pub fn wait(self) -> Result<()> {
        self.dev.sh.wait_for(
            "device event wait",
            &|| "kernel still running".into(),
            || self.ev.is_complete(),
        )?;
        self.dev.take_device_error(self.state, &self.kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPIR-V words of: two functions named `k` (an entry point) and `xpushmem_device_backoff.3` (a linker's
    /// suffix), `k` calling the back-off through a third, unnamed function; and an entry point `idle` that calls
    /// nothing.
    fn module() -> Vec<u8> {
        let op = |code: u32, ops: &[u32]| -> Vec<u32> {
            let mut v = vec![((ops.len() as u32 + 1) << 16) | code];
            v.extend_from_slice(ops);
            v
        };
        let s = |t: &str| -> Vec<u32> {
            let mut b = t.as_bytes().to_vec();
            b.resize((b.len() / 4 + 1) * 4, 0);
            b.chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        let mut w = vec![0x0723_0203, 0x0001_0000, 0, 100, 0];
        w.extend(op(15, &[[6].as_slice(), &[10], &s("k")].concat()));
        w.extend(op(15, &[[6].as_slice(), &[12], &s("idle")].concat()));
        w.extend(op(5, &[[10].as_slice(), &s("k")].concat()));
        w.extend(op(
            5,
            &[[11].as_slice(), &s("xpushmem_device_backoff.3")].concat(),
        ));
        for (f, callee) in [(10, Some(13)), (13, Some(11)), (11, None), (12, None)] {
            w.extend(op(54, &[1, f, 0, 2]));
            if let Some(c) = callee {
                w.extend(op(57, &[1, 50 + f, c]));
            }
            w.extend(op(56, &[]));
        }
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn finds_the_kernels_that_reach_the_backoff() {
        let m = module();
        assert_eq!(
            waiting_kernels(&m),
            std::collections::HashSet::from(["k".to_string()])
        );
        // Big-endian words are read too; garbage and truncated modules give nothing.
        let be: Vec<u8> = m.chunks(4).flat_map(|c| [c[3], c[2], c[1], c[0]]).collect();
        assert_eq!(waiting_kernels(&be).len(), 1);
        assert!(waiting_kernels(b"not a SPIR-V module").is_empty());
        assert!(waiting_kernels(&m[..40]).is_empty());
    }
}
