//! A minimal SPIR-V reader: kernel entry points and the kind and size of their parameters, which Level Zero's
//! `zeKernelSetArgumentValue` needs (pointer arguments go to OpenCL as USM pointers, local-memory arguments as
//! sizes, the rest as bytes), and the one filter that makes a GPU module acceptable to the OpenCL CPU runtime
//! ([`for_cpu_runtime`]).

use std::borrow::Cow;
use std::collections::HashMap;

/// Capability `KernelAttributesINTEL`: Intel's GPU driver takes it (Triton declares it for
/// `MaxWorkgroupSizeINTEL`); the OpenCL CPU runtime rejects the module.
const CAP_KERNEL_ATTRIBUTES_INTEL: u32 = 5892;
/// The other capabilities of the extension `SPV_INTEL_kernel_attributes` (`FPGAKernelAttributesINTEL`,
/// `FPGAKernelAttributesv2INTEL`): while one of them remains, so does the extension.
const CAP_OTHER_KERNEL_ATTRIBUTES: [u32; 2] = [5897, 6161];
/// The extension declaring those capabilities.
const EXT_KERNEL_ATTRIBUTES: &str = "SPV_INTEL_kernel_attributes";
/// The execution modes enabled by `KernelAttributesINTEL`: `MaxWorkgroupSizeINTEL`, `MaxWorkDimINTEL`,
/// `NoGlobalOffsetINTEL`. They are hints: dropping them does not change what a kernel computes.
const KERNEL_ATTRIBUTE_MODES: [u32; 3] = [5893, 5894, 5895];
const OP_EXTENSION: u32 = 10;
const OP_EXECUTION_MODE: u32 = 16;
const OP_CAPABILITY: u32 = 17;
const OP_EXECUTION_MODE_ID: u32 = 331;
const MAGIC: u32 = 0x0723_0203;

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// By value, this many bytes.
    Value(usize),
    /// A global/constant/generic pointer (8 bytes: the address).
    GlobalPtr,
    /// A local (work-group) memory pointer: the argument value is the size, no data.
    LocalPtr,
}

/// A kernel entry point.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    /// Name.
    pub name: String,
    /// Parameters.
    pub args: Vec<ArgKind>,
}

#[derive(Clone, Debug)]
enum Ty {
    Int(u32),
    Float(u32),
    Bool,
    Vector(u32, u32),
    Array(u32, u32),
    Struct(Vec<u32>),
    Pointer(u32, u32),
    Function(Vec<u32>),
    Other,
}

fn literal_string(words: &[u32]) -> (String, usize) {
    let mut bytes = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for b in w.to_le_bytes() {
            if b == 0 {
                return (String::from_utf8_lossy(&bytes).into_owned(), i + 1);
            }
            bytes.push(b);
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), words.len())
}

/// The words of a SPIR-V binary in host order, and whether the file's byte order was swapped.
fn words_of(bytes: &[u8]) -> Result<(Vec<u32>, bool), String> {
    if bytes.len() < 20 || bytes.len() % 4 != 0 {
        return Err(format!("not a SPIR-V binary: {} bytes", bytes.len()));
    }
    let mut words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let swapped = words[0] == MAGIC.swap_bytes();
    if swapped {
        for w in &mut words {
            *w = w.swap_bytes();
        }
    }
    if words[0] != MAGIC {
        return Err(format!("bad SPIR-V magic {:#010x}", words[0]));
    }
    Ok((words, swapped))
}

/// Removes from a SPIR-V module what Intel's GPU driver accepts and the OpenCL CPU runtime rejects, and only that:
/// the capability `KernelAttributesINTEL` (5892), the execution modes it enables (`MaxWorkgroupSizeINTEL`,
/// `MaxWorkDimINTEL`, `NoGlobalOffsetINTEL`) and the extension `SPV_INTEL_kernel_attributes` (kept if another of its
/// capabilities is declared). Returns the input unchanged (borrowed) when there is nothing to remove, so the same
/// bytes that a GPU loads are what the CPU runtime builds, less these hints. Errors name what is malformed.
pub fn for_cpu_runtime(bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let (words, swapped) = words_of(bytes)?;
    // Instruction spans (start, word count) and what to drop.
    let mut spans = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let wc = (words[i] >> 16) as usize;
        if wc == 0 || i + wc > words.len() {
            return Err(format!("truncated SPIR-V instruction at word {i}"));
        }
        spans.push((i, wc));
        i += wc;
    }
    let caps: Vec<u32> = spans
        .iter()
        .filter(|&&(s, wc)| words[s] & 0xffff == OP_CAPABILITY && wc >= 2)
        .map(|&(s, _)| words[s + 1])
        .collect();
    if !caps.contains(&CAP_KERNEL_ATTRIBUTES_INTEL) {
        return Ok(Cow::Borrowed(bytes));
    }
    let keep_extension = caps.iter().any(|c| CAP_OTHER_KERNEL_ATTRIBUTES.contains(c));
    let drop = |s: usize, wc: usize| -> bool {
        let a = &words[s + 1..s + wc];
        match words[s] & 0xffff {
            OP_CAPABILITY => a.first() == Some(&CAP_KERNEL_ATTRIBUTES_INTEL),
            OP_EXTENSION => !keep_extension && literal_string(a).0 == EXT_KERNEL_ATTRIBUTES,
            OP_EXECUTION_MODE | OP_EXECUTION_MODE_ID => {
                a.len() >= 2 && KERNEL_ATTRIBUTE_MODES.contains(&a[1])
            }
            _ => false,
        }
    };
    let mut out: Vec<u32> = words[..5].to_vec();
    for &(s, wc) in &spans {
        if !drop(s, wc) {
            out.extend_from_slice(&words[s..s + wc]);
        }
    }
    Ok(Cow::Owned(
        out.into_iter()
            .flat_map(|w| if swapped { w.swap_bytes() } else { w }.to_le_bytes())
            .collect(),
    ))
}

/// Parses a SPIR-V binary. Errors name what is malformed.
pub fn parse(bytes: &[u8]) -> Result<Vec<KernelInfo>, String> {
    let (words, _) = words_of(bytes)?;
    let mut types: HashMap<u32, Ty> = HashMap::new();
    let mut constants: HashMap<u32, u64> = HashMap::new();
    let mut entries: Vec<(u32, String)> = Vec::new();
    let mut fn_types: HashMap<u32, u32> = HashMap::new();
    let mut i = 5;
    while i < words.len() {
        let wc = (words[i] >> 16) as usize;
        let op = words[i] & 0xffff;
        if wc == 0 || i + wc > words.len() {
            return Err(format!("truncated SPIR-V instruction at word {i}"));
        }
        let a = &words[i + 1..i + wc];
        match op {
            15 if a.len() >= 3 && a[0] == 6 => entries.push((a[1], literal_string(&a[2..]).0)), // OpEntryPoint Kernel
            20 => {
                types.insert(a[0], Ty::Bool);
            }
            21 => {
                types.insert(a[0], Ty::Int(a[1]));
            }
            22 => {
                types.insert(a[0], Ty::Float(a[1]));
            }
            23 => {
                types.insert(a[0], Ty::Vector(a[1], a[2]));
            }
            28 => {
                types.insert(a[0], Ty::Array(a[1], a[2]));
            }
            30 => {
                types.insert(a[0], Ty::Struct(a[1..].to_vec()));
            }
            32 => {
                types.insert(a[0], Ty::Pointer(a[1], a[2]));
            }
            33 => {
                types.insert(a[0], Ty::Function(a[2..].to_vec()));
            }
            19 | 24..=27 | 29 | 31 | 34..=39 => {
                types.insert(a[0], Ty::Other);
            }
            43 if a.len() >= 3 => {
                let v = if a.len() >= 4 {
                    (a[2] as u64) | ((a[3] as u64) << 32)
                } else {
                    a[2] as u64
                };
                constants.insert(a[1], v);
            }
            54 if a.len() >= 4 => {
                fn_types.insert(a[1], a[3]);
            }
            _ => {}
        }
        i += wc;
    }
    fn size_align(
        t: u32,
        types: &HashMap<u32, Ty>,
        consts: &HashMap<u32, u64>,
        depth: u32,
    ) -> Option<(usize, usize)> {
        if depth > 32 {
            return None;
        }
        match types.get(&t)? {
            Ty::Int(w) | Ty::Float(w) => {
                let s = (*w as usize).div_ceil(8);
                Some((s, s))
            }
            Ty::Bool => Some((1, 1)),
            Ty::Pointer(..) => Some((8, 8)),
            Ty::Vector(c, n) => {
                let (s, _) = size_align(*c, types, consts, depth + 1)?;
                let n = if *n == 3 { 4 } else { *n as usize };
                Some((s * n, s * n))
            }
            Ty::Array(e, len) => {
                let (s, al) = size_align(*e, types, consts, depth + 1)?;
                Some((s * *consts.get(len)? as usize, al))
            }
            Ty::Struct(m) => {
                let (mut off, mut max_al) = (0usize, 1usize);
                for t in m {
                    let (s, al) = size_align(*t, types, consts, depth + 1)?;
                    off = off.div_ceil(al) * al + s;
                    max_al = max_al.max(al);
                }
                Some((off.div_ceil(max_al) * max_al, max_al))
            }
            Ty::Function(_) | Ty::Other => None,
        }
    }
    let mut out = Vec::new();
    for (fid, name) in entries {
        let ft = fn_types
            .get(&fid)
            .ok_or_else(|| format!("entry point {name}: no OpFunction"))?;
        let params = match types.get(ft) {
            Some(Ty::Function(p)) => p.clone(),
            _ => return Err(format!("entry point {name}: bad function type")),
        };
        let mut args = Vec::new();
        for (k, p) in params.iter().enumerate() {
            let kind = match types.get(p) {
                // Workgroup storage class: local memory.
                Some(Ty::Pointer(4, _)) => ArgKind::LocalPtr,
                // Function storage class: a by-value aggregate (ByVal).
                Some(Ty::Pointer(7, pointee)) => ArgKind::Value(
                    size_align(*pointee, &types, &constants, 0)
                        .ok_or_else(|| {
                            format!("kernel {name} argument {k}: unsupported by-value type")
                        })?
                        .0,
                ),
                Some(Ty::Pointer(..)) => ArgKind::GlobalPtr,
                Some(_) => ArgKind::Value(
                    size_align(*p, &types, &constants, 0)
                        .ok_or_else(|| format!("kernel {name} argument {k}: unsupported type"))?
                        .0,
                ),
                None => return Err(format!("kernel {name} argument {k}: unknown type id {p}")),
            };
            args.push(kind);
        }
        out.push(KernelInfo { name, args });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `y[i] = x[i] + 1` as triton-xpu 3.3.0b1 compiles it for an XPU target (see tests/triton_spirv.rs).
    const TRITON: &[u8] = include_bytes!("../tests/data/triton_add_one.spv");

    fn instructions(bytes: &[u8]) -> Vec<Vec<u32>> {
        let (w, _) = words_of(bytes).unwrap();
        let mut out = Vec::new();
        let mut i = 5;
        while i < w.len() {
            let wc = (w[i] >> 16) as usize;
            out.push(w[i..i + wc].to_vec());
            i += wc;
        }
        out
    }

    fn has(insts: &[Vec<u32>], op: u32, pred: impl Fn(&[u32]) -> bool) -> bool {
        insts.iter().any(|x| x[0] & 0xffff == op && pred(&x[1..]))
    }

    #[test]
    fn triton_module_loses_exactly_the_kernel_attributes() {
        let before = instructions(TRITON);
        // The compiler's module has what the CPU runtime rejects ...
        assert!(has(&before, OP_CAPABILITY, |a| a[0]
            == CAP_KERNEL_ATTRIBUTES_INTEL));
        assert!(has(&before, OP_EXTENSION, |a| literal_string(a).0
            == EXT_KERNEL_ATTRIBUTES));
        assert!(has(&before, OP_EXECUTION_MODE, |a| a[1] == 5893));
        let out = for_cpu_runtime(TRITON).unwrap();
        assert!(matches!(out, Cow::Owned(_)));
        let after = instructions(&out);
        // ... and loses it,
        assert!(!has(&after, OP_CAPABILITY, |a| a[0]
            == CAP_KERNEL_ATTRIBUTES_INTEL));
        assert!(!has(&after, OP_EXTENSION, |a| literal_string(a).0
            == EXT_KERNEL_ATTRIBUTES));
        assert!(!has(&after, OP_EXECUTION_MODE, |a| KERNEL_ATTRIBUTE_MODES
            .contains(&a[1])));
        // and nothing else: three instructions fewer, the rest in order and intact (the header too).
        assert_eq!(after.len(), before.len() - 3);
        let mut rest = before.iter();
        for inst in &after {
            assert!(
                rest.any(|b| b == inst),
                "instruction {inst:?} changed or moved"
            );
        }
        assert_eq!(out[..20], TRITON[..20]);
        assert!(has(&after, OP_EXECUTION_MODE, |a| a[1] == 35)); // SubgroupSize 16 stays
        assert!(has(&after, OP_EXTENSION, |a| literal_string(a).0
            == "SPV_INTEL_vector_compute"));
        // The kernel is read the same way, and a filtered module is left alone.
        let k = parse(&out).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "add_one");
        assert_eq!(
            k[0].args,
            vec![ArgKind::GlobalPtr, ArgKind::GlobalPtr, ArgKind::Value(4)]
        );
        assert!(matches!(for_cpu_runtime(&out).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn byte_swapped_module_is_filtered_in_its_own_order() {
        let swap = |b: &[u8]| -> Vec<u8> {
            b.chunks_exact(4)
                .flat_map(|c| [c[3], c[2], c[1], c[0]])
                .collect()
        };
        let filtered = for_cpu_runtime(&swap(TRITON)).unwrap().into_owned();
        assert_eq!(filtered, swap(&for_cpu_runtime(TRITON).unwrap()));
    }

    #[test]
    fn extension_stays_while_another_of_its_capabilities_is_declared() {
        let (mut w, _) = words_of(TRITON).unwrap();
        // OpCapability FPGAKernelAttributesINTEL, inserted after the header.
        w.insert(5, CAP_OTHER_KERNEL_ATTRIBUTES[0]);
        w.insert(5, (2 << 16) | OP_CAPABILITY);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        let after = instructions(&for_cpu_runtime(&bytes).unwrap());
        assert!(!has(&after, OP_CAPABILITY, |a| a[0]
            == CAP_KERNEL_ATTRIBUTES_INTEL));
        assert!(has(&after, OP_EXTENSION, |a| literal_string(a).0
            == EXT_KERNEL_ATTRIBUTES));
    }

    #[test]
    fn filter_rejects_malformed_modules() {
        assert!(for_cpu_runtime(b"hello world, not spirv!!").is_err());
        // The last instruction (OpFunctionEnd, one word) claims three words.
        let mut truncated = TRITON.to_vec();
        let last = truncated.len() - 4;
        truncated[last + 2..].copy_from_slice(&3u16.to_le_bytes());
        assert!(for_cpu_runtime(&truncated)
            .unwrap_err()
            .contains("truncated"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"hello world, not spirv!!").is_err());
        assert!(parse(&[0u8; 8]).is_err());
    }

    #[test]
    fn literal_strings_stop_at_nul() {
        let w = [
            u32::from_le_bytes(*b"abcd"),
            u32::from_le_bytes([b'e', 0, 0, 0]),
        ];
        assert_eq!(literal_string(&w), ("abcde".to_string(), 2));
    }
}
