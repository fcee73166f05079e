//! The staging path's device side: a device heap the provider cannot register (no `FI_HMEM`) is served through
//! messages (`net/ofi/msg.rs`: the protocol, its authentication and replies); each request applies here, on
//! this PE's heap through the device's service lane ([`DeviceSpan`]), its range checked first with the
//! transport's access errors, then against the heap's reachable part and its scratch tail (a growable heap's
//! unmapped reserve between them is refused).

use crate::error::Result;
use crate::net::ofi::{DeviceSpan, StagedHeap};
use crate::transport::{check_access, AmoOp};

/// This PE's unregistered device heap, as the staging messages reach it.
pub(crate) struct ZeHeap(pub(crate) DeviceSpan);

impl StagedHeap for ZeHeap {
    fn write(&self, off: usize, src: &[u8]) -> Result<()> {
        check_access("fabric", "staged access", off, src.len(), 1, self.0.end())?;
        self.0.write(off, src)
    }

    fn read(&self, off: usize, len: usize, out: &mut Vec<u8>) -> Result<()> {
        check_access("fabric", "staged access", off, len, 1, self.0.end())?;
        out.resize(len, 0);
        self.0.read(off, out)
    }

    fn amo(&self, off: usize, width: usize, op: AmoOp, operand: u64) -> Result<u64> {
        check_access("fabric", "staged atomic", off, width, width, self.0.end())?;
        self.0.amo(off, width, op, operand)
    }
}
