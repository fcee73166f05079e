//! Element types of tensor views, and the half-precision conversions the reductions use.
//!
//! `f16` (IEEE binary16) and `bf16` (bfloat16) are carried as raw `u16` bits. Reductions convert them to `f32`
//! exactly, add in `f32`, and convert back with round-to-nearest-even, as PyTorch's kernels do.

use xpushmem::{Error, Result};

/// The element type of a [`crate::TensorView`]. The discriminants are the C ABI's `XPUSHMEM_OPS_*` dtype values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DType {
    /// `torch.float32`.
    F32 = 0,
    /// `torch.float16` (IEEE binary16).
    F16 = 1,
    /// `torch.bfloat16`.
    BF16 = 2,
    /// `torch.float64`.
    F64 = 3,
    /// `torch.int8`.
    I8 = 4,
    /// `torch.uint8`.
    U8 = 5,
    /// `torch.int16`.
    I16 = 6,
    /// `torch.int32`.
    I32 = 7,
    /// `torch.int64`.
    I64 = 8,
}

impl DType {
    /// Every dtype, in discriminant order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::I64,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// PyTorch's name of the dtype (`float32`, `bfloat16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
        }
    }

    /// The dtype with C ABI value `v`; an error naming the valid values otherwise.
    pub fn from_code(v: i32) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|d| *d as i32 == v)
            .ok_or_else(|| Error::InvalidArgument {
                name: "dtype",
                value: v.to_string(),
                reason: "must be one of 0 float32, 1 float16, 2 bfloat16, 3 float64, 4 int8, 5 uint8, 6 int16, 7 int32, 8 int64".into(),
            })
    }

    /// Whether the dtype is one of the floating-point types the tile reductions accept (float32, float16,
    /// bfloat16: PyTorch's `AT_DISPATCH_NV_FLOATS`).
    pub const fn is_reducible(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Decode the element at the start of `b` (little-endian, at least `size()` bytes) as `f32` (exact for f16 and
    /// bf16; f64 and the 32/64-bit integers are rounded).
    pub fn load_f32(self, b: &[u8]) -> f32 {
        match self {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::F16 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            DType::BF16 => bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            DType::F64 => {
                f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
            }
            DType::I8 => b[0] as i8 as f32,
            DType::U8 => b[0] as f32,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f32,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
            DType::I64 => {
                i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
            }
        }
    }

    /// Encode `v` into the start of `b` (float types round to nearest even; integer types saturate).
    pub fn store_f32(self, v: f32, b: &mut [u8]) {
        match self {
            DType::F32 => b[..4].copy_from_slice(&v.to_le_bytes()),
            DType::F16 => b[..2].copy_from_slice(&f32_to_f16(v).to_le_bytes()),
            DType::BF16 => b[..2].copy_from_slice(&f32_to_bf16(v).to_le_bytes()),
            DType::F64 => b[..8].copy_from_slice(&(v as f64).to_le_bytes()),
            DType::I8 => b[0] = v as i8 as u8,
            DType::U8 => b[0] = v as u8,
            DType::I16 => b[..2].copy_from_slice(&(v as i16).to_le_bytes()),
            DType::I32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
            DType::I64 => b[..8].copy_from_slice(&(v as i64).to_le_bytes()),
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The `f32` value of IEEE binary16 bits `h` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: shift the leading one into the implicit position.
            let mut e = 113u32; // biased f32 exponent of 2^-14, plus one for the first shift
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// IEEE binary16 bits of `x`, rounded to nearest even (overflow gives infinity, NaN stays NaN).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        let nan = if man != 0 {
            0x200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1; // a carry into the exponent is the correct result (up to infinity)
    }
    sign | r as u16
}

/// The `f32` value of bfloat16 bits `h` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// bfloat16 bits of `x`, rounded to nearest even (NaN stays a quiet NaN).
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (r >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan(), "{h:#x}");
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x} -> {f}");
            }
        }
    }

    #[test]
    fn f16_known_values() {
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(-2.0), 0xc000);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // halfway to the next binade rounds to even = inf
        assert_eq!(f32_to_f16(1e9), 0x7c00);
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001); // 2^-24
        assert_eq!(f32_to_f16(2.980_232_2e-8), 0x0000); // 2^-25: tie, to even (zero)
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
    }

    /// Every midpoint between adjacent finite f16 values rounds to the even neighbour; just above or below it
    /// rounds to the nearer one.
    #[test]
    fn f16_midpoints_round_to_even() {
        for h in 0..0x7bffu16 {
            let (lo, hi) = (f16_to_f32(h) as f64, f16_to_f32(h + 1) as f64);
            let mid = ((lo + hi) / 2.0) as f32; // exact in f32: needs at most 12 significant bits
            assert_eq!(mid as f64, (lo + hi) / 2.0);
            let even = if h & 1 == 0 { h } else { h + 1 };
            assert_eq!(f32_to_f16(mid), even, "midpoint above {h:#x}");
            assert_eq!(f32_to_f16(-mid), even | 0x8000);
            let up = f32::from_bits(mid.to_bits() + 1);
            let down = f32::from_bits(mid.to_bits() - 1);
            assert_eq!(f32_to_f16(up), h + 1, "above midpoint of {h:#x}");
            assert_eq!(f32_to_f16(down), h, "below midpoint of {h:#x}");
        }
    }

    #[test]
    fn bf16_round_trips_and_rounds_to_even() {
        for h in 0..=u16::MAX {
            let f = bf16_to_f32(h);
            if f.is_nan() {
                assert!(bf16_to_f32(f32_to_bf16(f)).is_nan());
                continue;
            }
            assert_eq!(f32_to_bf16(f), h);
            if h & 0x7fff < 0x7f7f {
                // Midpoint towards the next larger magnitude.
                let mid = f32::from_bits(((h as u32) << 16) | 0x8000);
                let even = if h & 1 == 0 { h } else { h + 1 };
                assert_eq!(f32_to_bf16(mid), even, "{h:#x}");
                assert_eq!(f32_to_bf16(f32::from_bits(mid.to_bits() + 1)), h + 1);
                assert_eq!(f32_to_bf16(f32::from_bits(mid.to_bits() - 1)), h);
            }
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80); // rounds up to infinity
    }

    #[test]
    fn codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d as i32).unwrap(), d);
        }
        assert!(DType::from_code(9).is_err());
        assert!(DType::from_code(-1).is_err());
    }

    #[test]
    fn load_store_each_dtype() {
        for d in DType::ALL {
            let mut b = [0u8; 8];
            d.store_f32(3.0, &mut b);
            assert_eq!(d.load_f32(&b), 3.0, "{d}");
            d.store_f32(-1.0, &mut b);
            let want = if d == DType::U8 { 0.0 } else { -1.0 };
            assert_eq!(d.load_f32(&b), want, "{d}");
        }
    }
}
