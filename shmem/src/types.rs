//! Element types and typed handles to symmetric objects.
//!
//! A [`SymSlice<T>`] names `len` elements of type `T` at the same heap offset on every PE; a [`SymRef<T>`] names one
//! element. Both are plain values (`Copy`): the memory they name belongs to the heap, which the runtime owns, and every
//! access goes through a bounds-checked runtime call.

use crate::error::{Error, Result};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

mod sealed {
    pub trait Sealed {}
}

/// Plain-data element types that may live in the symmetric heap and travel by RMA: every bit pattern is a valid
/// value and there are no pointers inside. Sealed: implemented for the standard OpenSHMEM element types only.
pub trait Symmetric:
    sealed::Sealed + Copy + Default + Send + Sync + PartialEq + fmt::Debug + 'static
{
    /// Name of the type in the C and OpenSHMEM APIs' terms (`int32`, `float`, ...).
    const NAME: &'static str;
}

/// Types on which the extended atomics work (`fetch`, `set`, `swap`, `compare_swap`): 4- and 8-byte integers and
/// floating-point numbers.
pub trait AtomicWord: Symmetric {
    /// Width in bytes (4 or 8).
    const WIDTH: usize;
    /// The value's bits, zero-extended to 64.
    fn to_bits(self) -> u64;
    /// The value from its bits (the low `WIDTH` bytes).
    fn from_bits(bits: u64) -> Self;
}

/// Integer types on which every atomic, `wait_until` and `test` work.
pub trait AtomicInt: AtomicWord + PartialOrd + Ord {
    /// The value 1 (for `inc`).
    const ONE: Self;
}

macro_rules! symmetric {
    ($($t:ty => $name:literal),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Symmetric for $t { const NAME: &'static str = $name; }
    )*};
}
symmetric!(
    i8 => "int8", i16 => "int16", i32 => "int32", i64 => "int64", isize => "ptrdiff",
    u8 => "uint8", u16 => "uint16", u32 => "uint32", u64 => "uint64", usize => "size",
    f32 => "float", f64 => "double",
);

macro_rules! atomic_word {
    ($($t:ty, $w:literal, $to:expr, $from:expr);* $(;)?) => {$(
        impl AtomicWord for $t {
            const WIDTH: usize = $w;
            #[inline]
            fn to_bits(self) -> u64 { ($to)(self) }
            #[inline]
            fn from_bits(bits: u64) -> Self { ($from)(bits) }
        }
    )*};
}
atomic_word!(
    i32, 4, |v: i32| v as u32 as u64, |b: u64| b as u32 as i32;
    u32, 4, |v: u32| v as u64, |b: u64| b as u32;
    i64, 8, |v: i64| v as u64, |b: u64| b as i64;
    u64, 8, |v: u64| v, |b: u64| b;
    isize, 8, |v: isize| v as i64 as u64, |b: u64| b as i64 as isize;
    usize, 8, |v: usize| v as u64, |b: u64| b as usize;
    f32, 4, |v: f32| v.to_bits() as u64, |b: u64| f32::from_bits(b as u32);
    f64, 8, |v: f64| v.to_bits(), f64::from_bits;
);

const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "xpushmem supports 64-bit targets only"
);

macro_rules! atomic_int {
    ($($t:ty),*) => {$( impl AtomicInt for $t { const ONE: Self = 1; } )*};
}
atomic_int!(i32, u32, i64, u64, isize, usize);

/// `len` elements of `T` at one offset of every PE's symmetric heap.
pub struct SymSlice<T> {
    pub(crate) off: usize,
    pub(crate) len: usize,
    _t: PhantomData<fn() -> T>,
}

/// One element of `T` at one offset of every PE's symmetric heap.
pub struct SymRef<T> {
    pub(crate) off: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for SymSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SymSlice<T> {}
impl<T> Clone for SymRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SymRef<T> {}
impl<T> PartialEq for SymSlice<T> {
    fn eq(&self, o: &Self) -> bool {
        self.off == o.off && self.len == o.len
    }
}
impl<T> Eq for SymSlice<T> {}
impl<T> PartialEq for SymRef<T> {
    fn eq(&self, o: &Self) -> bool {
        self.off == o.off
    }
}
impl<T> Eq for SymRef<T> {}

impl<T: Symmetric> fmt::Debug for SymSlice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SymSlice<{}>[{}] @ heap+{:#x}",
            T::NAME,
            self.len,
            self.off
        )
    }
}
impl<T: Symmetric> fmt::Debug for SymRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SymRef<{}> @ heap+{:#x}", T::NAME, self.off)
    }
}

impl<T: Symmetric> SymSlice<T> {
    pub(crate) fn new(off: usize, len: usize) -> Self {
        SymSlice {
            off,
            len,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Offset of the first element from the start of the symmetric heap (the same on every PE).
    pub fn heap_offset(&self) -> usize {
        self.off
    }

    /// A sub-slice; an error when the range does not lie inside this slice.
    ///
    /// ```
    /// # let sh = xpushmem::init_single().unwrap();
    /// let buf = sh.malloc::<u32>(10).unwrap();
    /// let tail = buf.slice(4..).unwrap();
    /// assert_eq!(tail.len(), 6);
    /// assert!(buf.slice(8..12).is_err());
    /// # sh.free(buf).unwrap();
    /// ```
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<SymSlice<T>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        if start > end || end > self.len {
            return Err(Error::OutOfBounds {
                what: "element range",
                start,
                len: end.saturating_sub(start),
                limit: self.len,
                context: format!("SymSlice::slice of {self:?}"),
            });
        }
        Ok(SymSlice::new(
            self.off + start * std::mem::size_of::<T>(),
            end - start,
        ))
    }

    /// Element `i`; an error when `i >= len`.
    pub fn at(&self, i: usize) -> Result<SymRef<T>> {
        if i >= self.len {
            return Err(Error::OutOfBounds {
                what: "element index",
                start: i,
                len: 1,
                limit: self.len,
                context: format!("SymSlice::at of {self:?}"),
            });
        }
        Ok(SymRef::new(self.off + i * std::mem::size_of::<T>()))
    }

    /// The same memory as bytes.
    pub fn as_bytes(&self) -> SymSlice<u8> {
        SymSlice::new(self.off, self.size_bytes())
    }

    /// The same memory as elements of `U`: an error unless the offset is aligned for `U` and the size is a
    /// multiple of `U`'s.
    pub fn cast<U: Symmetric>(&self) -> Result<SymSlice<U>> {
        let (bytes, usz) = (self.size_bytes(), std::mem::size_of::<U>());
        if self.off % std::mem::align_of::<U>() != 0 || bytes % usz != 0 {
            return Err(Error::invalid(
                "slice",
                format!("{self:?}"),
                format!(
                    "cannot be viewed as {} ({usz}-byte aligned elements)",
                    U::NAME
                ),
            ));
        }
        Ok(SymSlice::new(self.off, bytes / usz))
    }

    /// Iterate over the elements as [`SymRef`]s.
    pub fn iter(&self) -> impl Iterator<Item = SymRef<T>> + '_ {
        (0..self.len).map(move |i| SymRef::new(self.off + i * std::mem::size_of::<T>()))
    }
}

impl<T: Symmetric> SymRef<T> {
    pub(crate) fn new(off: usize) -> Self {
        SymRef {
            off,
            _t: PhantomData,
        }
    }

    /// Offset from the start of the symmetric heap (the same on every PE).
    pub fn heap_offset(&self) -> usize {
        self.off
    }

    /// This element as a one-element slice.
    pub fn as_slice(&self) -> SymSlice<T> {
        SymSlice::new(self.off, 1)
    }
}

/// Comparison operators of `wait_until`, `test` and `signal_wait_until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl Cmp {
    /// Whether `lhs <cmp> rhs` holds.
    pub fn holds<T: PartialOrd>(self, lhs: T, rhs: T) -> bool {
        match self {
            Cmp::Eq => lhs == rhs,
            Cmp::Ne => lhs != rhs,
            Cmp::Gt => lhs > rhs,
            Cmp::Ge => lhs >= rhs,
            Cmp::Lt => lhs < rhs,
            Cmp::Le => lhs <= rhs,
        }
    }

    /// All comparators, in OpenSHMEM's order of constants.
    pub const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le];
}

/// How `put_signal` updates the signal word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalOp {
    /// Store the value.
    Set,
    /// Add the value atomically.
    Add,
}

/// Thread-safety levels of `init_thread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadLevel {
    /// One thread in the process.
    Single,
    /// Several threads, only the main thread calls xpushmem.
    Funneled,
    /// Several threads call xpushmem, one at a time.
    Serialized,
    /// Any thread calls xpushmem at any time.
    Multiple,
}

/// A completion and ordering domain (an OpenSHMEM context): the quiet of a domain
/// ([`crate::domain::OnDomain::quiet`]) completes the operations issued in it only, its fence orders them. [`Domain::DEFAULT`] is the
/// domain of every call that names none (the native API, the collectives); others come from
/// [`crate::Shmem::domain_open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Domain(pub(crate) u32);

impl Domain {
    /// The default domain.
    pub const DEFAULT: Domain = Domain(0);

    /// The domain's number (0: the default one).
    pub fn number(self) -> u32 {
        self.0
    }
}

/// Operations of the atomic memory interface, applied by a transport to one 4- or 8-byte word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AmoOp {
    /// Read the word.
    Fetch,
    /// Write the operand.
    Set,
    /// Write the operand, return the old value.
    Swap,
    /// Write the operand if the word equals `cond`; return the old value.
    CompareSwap {
        /// Expected value.
        cond: u64,
    },
    /// Wrapping add.
    FetchAdd,
    /// Bitwise and.
    FetchAnd,
    /// Bitwise or.
    FetchOr,
    /// Bitwise xor.
    FetchXor,
}

impl AmoOp {
    /// The device's operation code of this atomic ([`crate::abi::AmoCode`], what the atomic kernels, the host
    /// proxy's requests and the fabric's wire carry) and its condition operand (`CompareSwap`'s, else 0).
    pub(crate) fn code(self) -> (crate::abi::AmoCode, u64) {
        use crate::abi::AmoCode as C;
        match self {
            AmoOp::Fetch => (C::Fetch, 0),
            AmoOp::Set => (C::Set, 0),
            AmoOp::Swap => (C::Swap, 0),
            AmoOp::CompareSwap { cond } => (C::CompareSwap, cond),
            AmoOp::FetchAdd => (C::FetchAdd, 0),
            AmoOp::FetchAnd => (C::FetchAnd, 0),
            AmoOp::FetchOr => (C::FetchOr, 0),
            AmoOp::FetchXor => (C::FetchXor, 0),
        }
    }
}

/// Where the user heap lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapKind {
    /// Host memory (memfd), CPU PEs.
    Host,
    /// Level Zero device memory, one device per PE.
    Device,
}

/// How the transports moved the local side of this PE's non-blocking transfers so far ([`crate::Shmem::copy_stats`]):
/// through a copy the runtime made (a private source copied into a bounce or operation buffer, a get's bytes
/// received into an operation buffer, then copied out), or in place (the provider read or wrote the caller's memory:
/// the registered heap, or a registered user buffer, see [`crate::Shmem::register`]). Counted where the copy is made
/// (the fabric engine); transports that write mapped memory directly (same-node heaps) copy nothing and count
/// nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Puts whose source was copied before it was sent.
    pub puts_copied: u64,
    /// Bytes of those puts.
    pub put_bytes_copied: u64,
    /// Puts sent from their source in place.
    pub puts_in_place: u64,
    /// Gets received into a buffer of the runtime, then copied to the caller's.
    pub gets_copied: u64,
    /// Bytes of those gets.
    pub get_bytes_copied: u64,
    /// Gets received into the caller's (registered) buffer in place.
    pub gets_in_place: u64,
    /// Puts-with-signal sent as one message that the target applies, data then signal (the fabric over a provider
    /// with manual progress that does not order a signal behind its data); counted in `puts_copied` too.
    pub put_signals_as_messages: u64,
    /// Puts-with-signal whose data went as writes that tell the target of their landing, the signal as a message
    /// right behind them, applied by the target once they landed (the same providers, above one message's
    /// size); counted in `puts_copied` or `puts_in_place` too.
    pub put_signals_after_writes: u64,
}

impl std::ops::Add for CopyStats {
    type Output = CopyStats;
    /// The sum of two counts.
    fn add(self, o: CopyStats) -> CopyStats {
        CopyStats {
            puts_copied: self.puts_copied + o.puts_copied,
            put_bytes_copied: self.put_bytes_copied + o.put_bytes_copied,
            puts_in_place: self.puts_in_place + o.puts_in_place,
            gets_copied: self.gets_copied + o.gets_copied,
            get_bytes_copied: self.get_bytes_copied + o.get_bytes_copied,
            gets_in_place: self.gets_in_place + o.gets_in_place,
            put_signals_as_messages: self.put_signals_as_messages + o.put_signals_as_messages,
            put_signals_after_writes: self.put_signals_after_writes + o.put_signals_after_writes,
        }
    }
}
