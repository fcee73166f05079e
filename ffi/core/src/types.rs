//! The C element types of each function family: one list per family, the single source of truth for both the
//! macro-generated functions and their C declarations in the generated headers.
//!
//! Each entry is `(TYPENAME, Rust type, "C type")`. `for_X_types!(m; args...)` expands to
//! `m! { args... ; entries... }`.

/// `long double` (x86-64: 80-bit x87 in 16 bytes): moved as opaque 16-byte elements (RMA only; Rust cannot pass
/// it by value, so `_p`/`_g` for it are `static inline` in the headers).
#[repr(C, align(16))]
#[derive(Debug, Clone, Copy, Default)]
pub struct LongDouble(pub [u8; 16]);

/// Every standard RMA type (OpenSHMEM 1.5 table 5) except `long double`.
#[macro_export]
macro_rules! for_rma_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (float, f32, "float"),
            (double, f64, "double"),
            (char, ::core::ffi::c_char, "char"),
            (schar, ::core::ffi::c_schar, "signed char"),
            (short, ::core::ffi::c_short, "short"),
            (int, ::core::ffi::c_int, "int"),
            (long, ::core::ffi::c_long, "long"),
            (longlong, ::core::ffi::c_longlong, "long long"),
            (uchar, ::core::ffi::c_uchar, "unsigned char"),
            (ushort, ::core::ffi::c_ushort, "unsigned short"),
            (uint, ::core::ffi::c_uint, "unsigned int"),
            (ulong, ::core::ffi::c_ulong, "unsigned long"),
            (ulonglong, ::core::ffi::c_ulonglong, "unsigned long long"),
            (int8, i8, "int8_t"),
            (int16, i16, "int16_t"),
            (int32, i32, "int32_t"),
            (int64, i64, "int64_t"),
            (uint8, u8, "uint8_t"),
            (uint16, u16, "uint16_t"),
            (uint32, u32, "uint32_t"),
            (uint64, u64, "uint64_t"),
            (size, usize, "size_t"),
            (ptrdiff, isize, "ptrdiff_t"),
        }
    };
}

/// `long double`, for the pointer-only RMA families.
#[macro_export]
macro_rules! for_longdouble {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ; (longdouble, $crate::types::LongDouble, "long double") }
    };
}

/// Standard AMO types (table 6): every atomic, and the point-to-point synchronisation types (table 11).
#[macro_export]
macro_rules! for_amo_std_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (int, ::core::ffi::c_int, "int"),
            (long, ::core::ffi::c_long, "long"),
            (longlong, ::core::ffi::c_longlong, "long long"),
            (uint, ::core::ffi::c_uint, "unsigned int"),
            (ulong, ::core::ffi::c_ulong, "unsigned long"),
            (ulonglong, ::core::ffi::c_ulonglong, "unsigned long long"),
            (int32, i32, "int32_t"),
            (int64, i64, "int64_t"),
            (uint32, u32, "uint32_t"),
            (uint64, u64, "uint64_t"),
            (size, usize, "size_t"),
            (ptrdiff, isize, "ptrdiff_t"),
        }
    };
}

/// Point-to-point synchronisation types beyond the standard AMO types (OpenSHMEM 1.5 table 11: `short` and
/// `unsigned short`; read through the aligned 4-byte word that holds them, see `xpushmem::SyncInt`).
#[macro_export]
macro_rules! for_sync16_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (short, ::core::ffi::c_short, "short"),
            (ushort, ::core::ffi::c_ushort, "unsigned short"),
        }
    };
}

/// Extended AMO types beyond the standard ones (table 7): `fetch`, `set`, `swap` only.
#[macro_export]
macro_rules! for_amo_float_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (float, f32, "float"),
            (double, f64, "double"),
        }
    };
}

/// Bitwise AMO types (table 8).
#[macro_export]
macro_rules! for_amo_bitwise_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (uint, ::core::ffi::c_uint, "unsigned int"),
            (ulong, ::core::ffi::c_ulong, "unsigned long"),
            (ulonglong, ::core::ffi::c_ulonglong, "unsigned long long"),
            (int32, i32, "int32_t"),
            (int64, i64, "int64_t"),
            (uint32, u32, "uint32_t"),
            (uint64, u64, "uint64_t"),
        }
    };
}

/// Sized RMA families: `(bits, bytes)`.
#[macro_export]
macro_rules! for_sizes {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ; (8, 1), (16, 2), (32, 4), (64, 8), (128, 16) }
    };
}

/// Types of the bitwise reductions (`and`, `or`, `xor`; OpenSHMEM 1.5 table 10).
#[macro_export]
macro_rules! for_reduce_bitwise_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (uchar, ::core::ffi::c_uchar, "unsigned char"),
            (ushort, ::core::ffi::c_ushort, "unsigned short"),
            (uint, ::core::ffi::c_uint, "unsigned int"),
            (ulong, ::core::ffi::c_ulong, "unsigned long"),
            (ulonglong, ::core::ffi::c_ulonglong, "unsigned long long"),
            (int8, i8, "int8_t"),
            (int16, i16, "int16_t"),
            (int32, i32, "int32_t"),
            (int64, i64, "int64_t"),
            (uint8, u8, "uint8_t"),
            (uint16, u16, "uint16_t"),
            (uint32, u32, "uint32_t"),
            (uint64, u64, "uint64_t"),
            (size, usize, "size_t"),
        }
    };
}

/// Types of the arithmetic reductions (`min`, `max`, `sum`, `prod`; table 10 without `long double` and the
/// complex types).
#[macro_export]
macro_rules! for_reduce_arith_types {
    ($m:path; $($args:tt)*) => {
        $m! { $($args)* ;
            (char, ::core::ffi::c_char, "char"),
            (schar, ::core::ffi::c_schar, "signed char"),
            (short, ::core::ffi::c_short, "short"),
            (int, ::core::ffi::c_int, "int"),
            (long, ::core::ffi::c_long, "long"),
            (longlong, ::core::ffi::c_longlong, "long long"),
            (ptrdiff, isize, "ptrdiff_t"),
            (uchar, ::core::ffi::c_uchar, "unsigned char"),
            (ushort, ::core::ffi::c_ushort, "unsigned short"),
            (uint, ::core::ffi::c_uint, "unsigned int"),
            (ulong, ::core::ffi::c_ulong, "unsigned long"),
            (ulonglong, ::core::ffi::c_ulonglong, "unsigned long long"),
            (int8, i8, "int8_t"),
            (int16, i16, "int16_t"),
            (int32, i32, "int32_t"),
            (int64, i64, "int64_t"),
            (uint8, u8, "uint8_t"),
            (uint16, u16, "uint16_t"),
            (uint32, u32, "uint32_t"),
            (uint64, u64, "uint64_t"),
            (size, usize, "size_t"),
            (float, f32, "float"),
            (double, f64, "double"),
        }
    };
}
