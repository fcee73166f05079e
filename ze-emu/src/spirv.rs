//! A minimal SPIR-V reader: kernel entry points and the kind and size of their parameters, which Level Zero's
//! `zeKernelSetArgumentValue` needs (pointer arguments go to OpenCL as USM pointers, local-memory arguments as
//! sizes, the rest as bytes).

use std::collections::HashMap;

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

/// Parses a SPIR-V binary. Errors name what is malformed.
pub fn parse(bytes: &[u8]) -> Result<Vec<KernelInfo>, String> {
    if bytes.len() < 20 || bytes.len() % 4 != 0 {
        return Err(format!("not a SPIR-V binary: {} bytes", bytes.len()));
    }
    let mut words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if words[0] == 0x0302_2307 {
        for w in &mut words {
            *w = w.swap_bytes();
        }
    }
    if words[0] != 0x0723_0203 {
        return Err(format!("bad SPIR-V magic {:#010x}", words[0]));
    }
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
