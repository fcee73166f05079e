//! Macros generating the typed and sized function families for a prefix (`xpushmem` for the native API,
//! `pshmem` for the OpenSHMEM layer, whose `shmem_*` names are weak aliases of the `pshmem_*` ones).
//!
//! Arguments: `$p` the prefix; `$ret`/`$wrap` the result convention of the calls whose standard signature is
//! `void` (native: `c_int` via [`crate::error::code`]; OpenSHMEM: `()` via [`crate::error::void`]); for the
//! families with out-parameter variants, `$ex` the suffix of those (`_ex` native, `_nbi` OpenSHMEM AMOs) with
//! their own `$exret`/`$exwrap`. The C declarations of every family are generated from the same type lists
//! (`ffi/tests/cdecl`), and a test compares the exported symbols with the headers.

/// The routine name a family member reports in its error messages, from its symbol prefix: the OpenSHMEM layer
/// defines its implementations under the profiling interface's `pshmem`/`pshmem_ctx` prefixes (the standard
/// `shmem_*` names are weak aliases of them, see `ffi/oshmem/build.rs`) but names the standard routine.
#[doc(hidden)]
#[macro_export]
macro_rules! call_prefix {
    (pshmem) => {
        "shmem"
    };
    (pshmem_ctx) => {
        "shmem_ctx"
    };
    ($p:ident) => {
        stringify!($p)
    };
}

/// `put`, `get`, `put_nbi`, `get_nbi`, `iput`, `iget`, `put_signal`, `put_signal_nbi` for each type.
#[macro_export]
macro_rules! rma_typed {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( $crate::rma_typed!(@one $p $ctxspec, $ret, $wrap ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path ; ($n:ident, $t:ty, $c:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Copy `nelems` elements of `", $c, "` from local `source` to the symmetric `dest` on PE `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements; `dest` must be a symmetric address."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _put>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_put");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe, false, dom) } })
        }

        #[doc = concat!("Copy `nelems` elements of `", $c, "` from the symmetric `source` on PE `pe` to local `dest`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for `nelems` elements; `source` must be a symmetric address."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _get>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_get");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? unsafe { $crate::imp::get(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe) } })
        }

        #[doc = concat!("Non-blocking put of `", $c, "` elements: complete after `quiet` (`source` may be reused then).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements until completion; `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _put_nbi>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_put_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe, true, dom) } })
        }

        #[doc = concat!("Non-blocking get of `", $c, "` elements: `dest` is filled after `quiet`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for `nelems` elements; `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _get_nbi>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_get_nbi");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::get_as(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe, true, dom) } })
        }

        #[doc = concat!("Strided put of `", $c, "`: element `i` goes from `source[i*sst]` to `dest[i*dst]` on `pe`; strides >= 1.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for the strided elements; `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _iput>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_iput");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::iput_in(call, dest.cast(), source.cast(), dst, sst, nelems, ::core::mem::size_of::<$t>(), pe, dom) } })
        }

        #[doc = concat!("Strided get of `", $c, "`: element `i` goes from `source[i*sst]` on `pe` to `dest[i*dst]`; strides >= 1.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for the strided elements; `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _iget>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_iget");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? unsafe { $crate::imp::iget(call, dest.cast(), source.cast(), dst, sst, nelems, ::core::mem::size_of::<$t>(), pe) } })
        }

        #[doc = concat!("Put `nelems` `", $c, "` elements, then update the signal word `sig_addr` on `pe` (SET or ADD `signal`); the data is visible before the signal.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements; `dest` and `sig_addr` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _ $n _put_signal>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_put_signal");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), sig_addr, signal, sig_op, pe, dom) } })
        }

        #[doc = concat!("Non-blocking put with signal of `", $c, "` elements.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements until completion; `dest` and `sig_addr` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _ $n _put_signal_nbi>]($($ctx: $cty, )?dest: *mut $t, source: *const $t, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_put_signal_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest.cast(), source.cast(), nelems, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), sig_addr, signal, sig_op, pe, dom) } })
        }
    } };
}

/// `p` and `g` for each type.
#[macro_export]
macro_rules! rma_pg {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( $crate::rma_pg!(@one $p $ctxspec, $ret, $wrap ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path ; ($n:ident, $t:ty, $c:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Store one `", $c, "` at the symmetric `dest` on PE `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (it is checked; any value is safe)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _p>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_p");
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? $crate::imp::p_in(call, dest, value, pe, dom) })
        }

        #[doc = concat!("Load one `", $c, "` from the symmetric `source` on PE `pe` (0 on error; see `xpushmem_last_error`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be a symmetric address (it is checked; any value is safe)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _g>]($($ctx: $cty, )?source: *const $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_g");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::g(call, source, pe) })
        }
    } };
}

/// `g_ex`: `g` with the value through an out-pointer and an error code as result (native API).
#[macro_export]
macro_rules! rma_g_ex {
    ($p:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("Load one `", $c, "` from the symmetric `source` on PE `pe` into `*value`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`value` must be writable; `source` must be a symmetric address."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _g_ex>](value: *mut $t, source: *const $t, pe: ::core::ffi::c_int) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_g_ex");
            // SAFETY: the caller's contract on `value` is forwarded (one element).
            $crate::error::code(call, || unsafe { $crate::imp::get(call, value.cast(), source.cast(), 1, ::core::mem::size_of::<$t>(), ::core::mem::align_of::<$t>(), pe) })
        }
    )* } };
}

/// Sized families: `put<bits>`, `get<bits>`, their `_nbi`, `iput<bits>`, `iget<bits>`, `put<bits>_signal(_nbi)`.
#[macro_export]
macro_rules! rma_sized {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path ; $( ($bits:literal, $bytes:literal) ),* $(,)?) => { $( $crate::rma_sized!(@one $p $ctxspec, $ret, $wrap ; ($bits, $bytes)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path ; ($bits:literal, $bytes:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Copy `nelems` ", stringify!($bits), "-bit elements from local `source` to the symmetric `dest` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements; `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _put $bits>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_put", stringify!($bits));
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest, source, nelems, $bytes, 1, pe, false, dom) } })
        }

        #[doc = concat!("Copy `nelems` ", stringify!($bits), "-bit elements from the symmetric `source` on `pe` to local `dest`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for `nelems` elements; `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _get $bits>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_get", stringify!($bits));
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? unsafe { $crate::imp::get(call, dest, source, nelems, $bytes, 1, pe) } })
        }

        #[doc = concat!("Non-blocking `put", stringify!($bits), "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements until completion; `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _put $bits _nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_put", stringify!($bits), "_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest, source, nelems, $bytes, 1, pe, true, dom) } })
        }

        #[doc = concat!("Non-blocking `get", stringify!($bits), "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for `nelems` elements; `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _get $bits _nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_get", stringify!($bits), "_nbi");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::get_as(call, dest, source, nelems, $bytes, 1, pe, true, dom) } })
        }

        #[doc = concat!("Strided put of ", stringify!($bits), "-bit elements (strides in elements, >= 1).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for the strided elements; `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _iput $bits>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, dst: isize, sst: isize, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_iput", stringify!($bits));
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::iput_in(call, dest, source, dst, sst, nelems, $bytes, pe, dom) } })
        }

        #[doc = concat!("Strided get of ", stringify!($bits), "-bit elements (strides in elements, >= 1).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be writable for the strided elements; `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _iget $bits>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, dst: isize, sst: isize, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_iget", stringify!($bits));
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? unsafe { $crate::imp::iget(call, dest, source, dst, sst, nelems, $bytes, pe) } })
        }

        #[doc = concat!("`put", stringify!($bits), "` followed by a signal update on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements; `dest` and `sig_addr` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _put $bits _signal>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_put", stringify!($bits), "_signal");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest, source, nelems, $bytes, 1, sig_addr, signal, sig_op, pe, dom) } })
        }

        #[doc = concat!("Non-blocking `put", stringify!($bits), "_signal`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be readable for `nelems` elements until completion; `dest` and `sig_addr` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _put $bits _signal_nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_put", stringify!($bits), "_signal_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest, source, nelems, $bytes, 1, sig_addr, signal, sig_op, pe, dom) } })
        }
    } };
}

/// `putmem`, `getmem`, their `_nbi`, `putmem_signal(_nbi)`.
#[macro_export]
macro_rules! rma_mem {
    ($p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path) => { $crate::paste::paste! {
        /// Copy `nelems` bytes from local `source` to the symmetric `dest` on PE `pe`.
        ///
        /// # Safety
        /// `source` must be readable for `nelems` bytes; `dest` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _putmem>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_putmem");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest, source, nelems, 1, 1, pe, false, dom) } })
        }

        /// Copy `nelems` bytes from the symmetric `source` on PE `pe` to local `dest`.
        ///
        /// # Safety
        /// `dest` must be writable for `nelems` bytes; `source` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _getmem>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_getmem");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? unsafe { $crate::imp::get(call, dest, source, nelems, 1, 1, pe) } })
        }

        /// Non-blocking `putmem`.
        ///
        /// # Safety
        /// `source` must be readable for `nelems` bytes until completion; `dest` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _putmem_nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_putmem_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_as(call, dest, source, nelems, 1, 1, pe, true, dom) } })
        }

        /// Non-blocking `getmem`.
        ///
        /// # Safety
        /// `dest` must be writable for `nelems` bytes; `source` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _getmem_nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_getmem_nbi");
            // SAFETY: the caller's contract on `dest` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::get_as(call, dest, source, nelems, 1, 1, pe, true, dom) } })
        }

        /// `putmem` followed by a signal update (SET or ADD) on `pe`.
        ///
        /// # Safety
        /// `source` must be readable for `nelems` bytes; `dest` and `sig_addr` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _putmem_signal>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_putmem_signal");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest, source, nelems, 1, 1, sig_addr, signal, sig_op, pe, dom) } })
        }

        /// Non-blocking `putmem_signal`.
        ///
        /// # Safety
        /// `source` must be readable for `nelems` bytes until completion; `dest` and `sig_addr` must be symmetric.
        #[no_mangle]
        #[allow(clippy::unused_unit, clippy::too_many_arguments)]
        pub unsafe extern "C" fn [<$p _putmem_signal_nbi>]($($ctx: $cty, )?dest: *mut ::core::ffi::c_void, source: *const ::core::ffi::c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: ::core::ffi::c_int, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_putmem_signal_nbi");
            // SAFETY: the caller's contract on `source` is forwarded.
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? unsafe { $crate::imp::put_signal_in(call, dest, source, nelems, 1, 1, sig_addr, signal, sig_op, pe, dom) } })
        }
    } };
}

/// `atomic_fetch`, `atomic_set`, `atomic_swap` (every AMO type, floats included), with the out-parameter
/// variants `atomic_fetch$ex`, `atomic_swap$ex`.
#[macro_export]
macro_rules! amo_ext {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( $crate::amo_ext!(@one $p $ctxspec, $ret, $wrap, $ex, $exret, $exwrap ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path ; ($n:ident, $t:ty, $c:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Atomically read the `", $c, "` at the symmetric `source` on `pe` (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`source` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch>]($($ctx: $cty, )?source: *const $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo(call, source, $crate::imp::Amo::Fetch, pe) })
        }

        #[doc = concat!("Atomically read the `", $c, "` at `source` on `pe` into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `source` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch $ex>]($($ctx: $cty, )?fetch: *mut $t, source: *const $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch", stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo(call, source, $crate::imp::Amo::Fetch, pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }

        #[doc = concat!("Atomically write `value` to the `", $c, "` at the symmetric `dest` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_set>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_set");
            $wrap(call, || { let dom = $crate::imp::Domain::DEFAULT; $( let (pe, dom) = $crate::teams::ctx_route($ctx, pe, call)?; )? $crate::imp::amo_in(call, dest.cast_const(), $crate::imp::Amo::Set(value), pe, dom).map(|_| ()) })
        }

        #[doc = concat!("Atomically write `value` to the `", $c, "` at `dest` on `pe`; the previous value (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_swap>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_swap");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo(call, dest.cast_const(), $crate::imp::Amo::Swap(value), pe) })
        }

        #[doc = concat!("Atomic swap of the `", $c, "` at `dest` on `pe`, the previous value into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_swap $ex>]($($ctx: $cty, )?fetch: *mut $t, dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_swap", stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo(call, dest.cast_const(), $crate::imp::Amo::Swap(value), pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }
    } };
}

/// `atomic_compare_swap`, `atomic_fetch_inc`, `atomic_inc`, `atomic_fetch_add`, `atomic_add` (standard AMO
/// types), with the out-parameter variants of the fetching ones.
#[macro_export]
macro_rules! amo_std {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( $crate::amo_std!(@one $p $ctxspec, $ret, $wrap, $ex, $exret, $exwrap ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path ; ($n:ident, $t:ty, $c:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Atomically replace the `", $c, "` at `dest` on `pe` by `value` if it equals `cond`; the previous value (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_compare_swap>]($($ctx: $cty, )?dest: *mut $t, cond: $t, value: $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_compare_swap");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo(call, dest.cast_const(), $crate::imp::Amo::CompareSwap { cond, value }, pe) })
        }

        #[doc = concat!("Atomic compare-and-swap of the `", $c, "` at `dest` on `pe`, the previous value into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_compare_swap $ex>]($($ctx: $cty, )?fetch: *mut $t, dest: *mut $t, cond: $t, value: $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_compare_swap", stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo(call, dest.cast_const(), $crate::imp::Amo::CompareSwap { cond, value }, pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }

        #[doc = concat!("Atomically add 1 to the `", $c, "` at `dest` on `pe`; the previous value (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_inc>]($($ctx: $cty, )?dest: *mut $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_inc");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Inc, pe) })
        }

        #[doc = concat!("Atomic increment of the `", $c, "` at `dest` on `pe`, the previous value into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_inc $ex>]($($ctx: $cty, )?fetch: *mut $t, dest: *mut $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_inc", stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Inc, pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }

        #[doc = concat!("Atomically add 1 to the `", $c, "` at `dest` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_inc>]($($ctx: $cty, )?dest: *mut $t, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_inc");
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Inc, pe).map(|_| ()) })
        }

        #[doc = concat!("Atomically add `value` to the `", $c, "` at `dest` on `pe`; the previous value (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_add>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_add");
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Add(value), pe) })
        }

        #[doc = concat!("Atomic add to the `", $c, "` at `dest` on `pe`, the previous value into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_add $ex>]($($ctx: $cty, )?fetch: *mut $t, dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_add", stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Add(value), pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }

        #[doc = concat!("Atomically add `value` to the `", $c, "` at `dest` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_add>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_add");
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::Add(value), pe).map(|_| ()) })
        }
    } };
}

/// One bitwise AMO (`and`, `or`, `xor`) for each type: `atomic_fetch_OP`, its out-parameter variant, `atomic_OP`.
#[macro_export]
macro_rules! amo_bitwise {
    ($p:ident $ctxspec:tt, $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path, $op:ident, $variant:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $( $crate::amo_bitwise!(@one $p $ctxspec, $ret, $wrap, $ex, $exret, $exwrap, $op, $variant ; ($n, $t, $c)); )* };
    (@one $p:ident [$($ctx:ident : $cty:ty)?], $ret:ty, $wrap:path, $ex:ident, $exret:ty, $exwrap:path, $op:ident, $variant:ident ; ($n:ident, $t:ty, $c:literal)) => { $crate::paste::paste! {
        #[doc = concat!("Atomically `", stringify!($op), "` `value` into the `", $c, "` at `dest` on `pe`; the previous value (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_ $op>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $t {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_", stringify!($op));
            $crate::error::value(call, <$t>::default(), || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::$variant(value), pe) })
        }

        #[doc = concat!("Atomic `", stringify!($op), "` into the `", $c, "` at `dest` on `pe`, the previous value into `*fetch`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`fetch` must be writable (or NULL); `dest` must be symmetric."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_fetch_ $op $ex>]($($ctx: $cty, )?fetch: *mut $t, dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $exret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_fetch_", stringify!($op), stringify!($ex));
            $exwrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )?
                let v = $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::$variant(value), pe)?;
                // SAFETY: the caller's contract on `fetch`.
                unsafe { $crate::error::write_out(fetch, v) };
                Ok(())
            })
        }

        #[doc = concat!("Atomically `", stringify!($op), "` `value` into the `", $c, "` at `dest` on `pe`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`dest` must be a symmetric address (checked)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _atomic_ $op>]($($ctx: $cty, )?dest: *mut $t, value: $t, pe: ::core::ffi::c_int) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_atomic_", stringify!($op));
            $wrap(call, || { $( let pe = $crate::teams::ctx_pe($ctx, pe, call)?; )? $crate::imp::amo_int(call, dest.cast_const(), $crate::imp::AmoInt::$variant(value), pe).map(|_| ()) })
        }
    } };
}

/// Point-to-point synchronisation for each type: `wait_until`, `wait_until_{all,any,some}[_vector]`, `test`,
/// `test_{all,any,some}[_vector]`.
#[macro_export]
macro_rules! sync_typed {
    ($p:ident, $ret:ty, $wrap:path ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("Wait until this PE's `", $c, "` at `ivar` satisfies `ivar <cmp> cmp_value`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivar` must be a symmetric address (checked)."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _wait_until>](ivar: *mut $t, cmp: ::core::ffi::c_int, cmp_value: $t) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until");
            $wrap(call, || $crate::imp::wait_one(call, ivar, cmp, cmp_value, false).map(|_| ()))
        }

        #[doc = concat!("Whether this PE's `", $c, "` at `ivar` satisfies `<cmp> cmp_value` now: 1 or 0 (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivar` must be a symmetric address (checked)."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test>](ivar: *mut $t, cmp: ::core::ffi::c_int, cmp_value: $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test");
            $crate::error::value(call, 0, || $crate::imp::wait_one(call, ivar, cmp, cmp_value, true).map(::core::ffi::c_int::from))
        }

        #[doc = concat!("Wait until every `", $c, "` of `ivars[0..nelems]` not masked by `status` (non-zero = skip; NULL = none) satisfies `<cmp> cmp_value`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_all>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_all");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $wrap(call, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::All, false, ivars, nelems, status, ::core::ptr::null_mut(), cmp, &cmp_value, false) }.map(|_| ()))
        }

        #[doc = concat!("Wait until some `", $c, "` of `ivars` (not masked by `status`) satisfies `<cmp> cmp_value`; its index (SIZE_MAX when all are masked or on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_any>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_any");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $crate::error::value(call, usize::MAX, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Any, false, ivars, nelems, status, ::core::ptr::null_mut(), cmp, &cmp_value, false) })
        }

        #[doc = concat!("Wait until at least one `", $c, "` of `ivars` satisfies `<cmp> cmp_value`; writes the indices of all that do to `indices` and returns their number (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `indices` writable for `nelems` entries; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_some");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Some, false, ivars, nelems, status, indices, cmp, &cmp_value, false) })
        }

        #[doc = concat!("`wait_until_all` with one comparison value per `", $c, "` (`cmp_values[i]`).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        #[allow(clippy::unused_unit)]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_all_vector>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> $ret {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_all_vector");
            // SAFETY: the caller's contract.
            $wrap(call, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::All, false, ivars, nelems, status, ::core::ptr::null_mut(), cmp, cmp_values, true) }.map(|_| ()))
        }

        #[doc = concat!("`wait_until_any` with one comparison value per `", $c, "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_any_vector>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_any_vector");
            // SAFETY: the caller's contract.
            $crate::error::value(call, usize::MAX, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Any, false, ivars, nelems, status, ::core::ptr::null_mut(), cmp, cmp_values, true) })
        }

        #[doc = concat!("`wait_until_some` with one comparison value per `", $c, "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `indices` writable, `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _wait_until_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_wait_until_some_vector");
            // SAFETY: the caller's contract.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Some, false, ivars, nelems, status, indices, cmp, cmp_values, true) })
        }

        #[doc = concat!("Whether every `", $c, "` of `ivars` not masked by `status` satisfies `<cmp> cmp_value` now: 1 or 0 (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_all>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_all");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::All, true, ivars, nelems, status, ::core::ptr::null_mut(), cmp, &cmp_value, false) }.map(|x| x as ::core::ffi::c_int))
        }

        #[doc = concat!("The lowest index of a `", $c, "` of `ivars` satisfying `<cmp> cmp_value` now (SIZE_MAX when none, or on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_any>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_any");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $crate::error::value(call, usize::MAX, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Any, true, ivars, nelems, status, ::core::ptr::null_mut(), cmp, &cmp_value, false) })
        }

        #[doc = concat!("The indices of the `", $c, "`s of `ivars` satisfying `<cmp> cmp_value` now, written to `indices`; their number (0 on error).")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `indices` writable for `nelems` entries; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_some");
            // SAFETY: the caller's contract; `cmp_value` is a live local.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Some, true, ivars, nelems, status, indices, cmp, &cmp_value, false) })
        }

        #[doc = concat!("`test_all` with one comparison value per `", $c, "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_all_vector>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_all_vector");
            // SAFETY: the caller's contract.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::All, true, ivars, nelems, status, ::core::ptr::null_mut(), cmp, cmp_values, true) }.map(|x| x as ::core::ffi::c_int))
        }

        #[doc = concat!("`test_any` with one comparison value per `", $c, "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_any_vector>](ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_any_vector");
            // SAFETY: the caller's contract.
            $crate::error::value(call, usize::MAX, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Any, true, ivars, nelems, status, ::core::ptr::null_mut(), cmp, cmp_values, true) })
        }

        #[doc = concat!("`test_some` with one comparison value per `", $c, "`.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`ivars` symmetric; `indices` writable, `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> usize {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_some_vector");
            // SAFETY: the caller's contract.
            $crate::error::value(call, 0, || unsafe { $crate::imp::wait_set(call, $crate::imp::Need::Some, true, ivars, nelems, status, indices, cmp, cmp_values, true) })
        }
    )* } };
}

/// Error-code variants (`_ex`, result through the first out-pointer) of the value-returning point-to-point
/// calls (native API).
#[macro_export]
macro_rules! sync_ex {
    ($p:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        #[doc = concat!("`test` on a `", $c, "` with the result (1/0) in `*result`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`result` writable (or NULL); `ivar` symmetric."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _test_ex>](result: *mut ::core::ffi::c_int, ivar: *mut $t, cmp: ::core::ffi::c_int, cmp_value: $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_test_ex");
            $crate::error::code(call, || {
                let v = $crate::imp::wait_one(call, ivar, cmp, cmp_value, true)?;
                // SAFETY: the caller's contract on `result`.
                unsafe { $crate::error::write_out(result, ::core::ffi::c_int::from(v)) };
                Ok(())
            })
        }
    )* } };
    (@set $p:ident, $name:ident, $need:ident, $test:literal, $vector:tt, $with_indices:tt ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => { $crate::paste::paste! { $(
        $crate::sync_ex!(@one $p, $n, $t, $c, $name, $need, $test, $vector, $with_indices);
    )* } };
    (@one $p:ident, $n:ident, $t:ty, $c:literal, $name:ident, $need:ident, $test:literal, false, false) => { $crate::paste::paste! {
        #[doc = concat!("`", stringify!($name), "` on `", $c, "`s with the result in `*result`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`result` writable (or NULL); `ivars` symmetric; `status` NULL or readable for `nelems` ints."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ $name _ex>](result: *mut usize, ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_", stringify!($name), "_ex");
            $crate::error::code(call, || {
                let (need, test) = ($crate::imp::Need::$need, $test);
                // SAFETY: the caller's contract; `cmp_value` is a live local.
                let v = unsafe { $crate::imp::wait_set(call, need, test, ivars, nelems, status, ::core::ptr::null_mut(), cmp, &cmp_value, false) }?;
                // SAFETY: the caller's contract on `result`.
                unsafe { $crate::error::write_out(result, v) };
                Ok(())
            })
        }
    } };
    (@one $p:ident, $n:ident, $t:ty, $c:literal, $name:ident, $need:ident, $test:literal, true, false) => { $crate::paste::paste! {
        #[doc = concat!("`", stringify!($name), "` on `", $c, "`s with the result in `*result`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`result` writable (or NULL); `ivars` symmetric; `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ $name _ex>](result: *mut usize, ivars: *mut $t, nelems: usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_", stringify!($name), "_ex");
            $crate::error::code(call, || {
                let (need, test) = ($crate::imp::Need::$need, $test);
                // SAFETY: the caller's contract.
                let v = unsafe { $crate::imp::wait_set(call, need, test, ivars, nelems, status, ::core::ptr::null_mut(), cmp, cmp_values, true) }?;
                // SAFETY: the caller's contract on `result`.
                unsafe { $crate::error::write_out(result, v) };
                Ok(())
            })
        }
    } };
    (@one $p:ident, $n:ident, $t:ty, $c:literal, $name:ident, $need:ident, $test:literal, false, true) => { $crate::paste::paste! {
        #[doc = concat!("`", stringify!($name), "` on `", $c, "`s with the number of indices in `*result`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`result` writable (or NULL); `ivars` symmetric; `indices` writable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ $name _ex>](result: *mut usize, ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_value: $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_", stringify!($name), "_ex");
            $crate::error::code(call, || {
                let (need, test) = ($crate::imp::Need::$need, $test);
                // SAFETY: the caller's contract; `cmp_value` is a live local.
                let v = unsafe { $crate::imp::wait_set(call, need, test, ivars, nelems, status, indices, cmp, &cmp_value, false) }?;
                // SAFETY: the caller's contract on `result`.
                unsafe { $crate::error::write_out(result, v) };
                Ok(())
            })
        }
    } };
    (@one $p:ident, $n:ident, $t:ty, $c:literal, $name:ident, $need:ident, $test:literal, true, true) => { $crate::paste::paste! {
        #[doc = concat!("`", stringify!($name), "` on `", $c, "`s with the number of indices in `*result`; an error code.")]
        #[doc = ""]
        #[doc = "# Safety"]
        #[doc = "`result` writable (or NULL); `ivars` symmetric; `indices` writable, `cmp_values` readable and `status` NULL or readable for `nelems` entries."]
        #[no_mangle]
        pub unsafe extern "C" fn [<$p _ $n _ $name _ex>](result: *mut usize, ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const ::core::ffi::c_int, cmp: ::core::ffi::c_int, cmp_values: *mut $t) -> ::core::ffi::c_int {
            let call = concat!($crate::call_prefix!($p), "_", stringify!($n), "_", stringify!($name), "_ex");
            $crate::error::code(call, || {
                let (need, test) = ($crate::imp::Need::$need, $test);
                // SAFETY: the caller's contract.
                let v = unsafe { $crate::imp::wait_set(call, need, test, ivars, nelems, status, indices, cmp, cmp_values, true) }?;
                // SAFETY: the caller's contract on `result`.
                unsafe { $crate::error::write_out(result, v) };
                Ok(())
            })
        }
    } };
}
