//! C declarations of the macro-generated function families, generated from the same type lists as the Rust
//! functions (`xpushmem_ffi_core::for_*_types!`). cbindgen cannot see macro-generated functions on stable Rust,
//! so the header generator appends these to cbindgen's output; the symbol test checks both against the library.
#![allow(dead_code)]

/// One C element type of a family.
#[derive(Debug, Clone, Copy)]
pub struct Ty {
    /// TYPENAME in function names.
    pub n: &'static str,
    /// The C type.
    pub c: &'static str,
}

macro_rules! tylist {
    ($name:ident ; $( ($n:ident, $t:ty, $c:literal) ),* $(,)?) => {
        pub const $name: &[Ty] = &[$(Ty { n: stringify!($n), c: $c }),*];
    };
}

xpushmem_ffi_core::for_rma_types!(tylist; RMA);
xpushmem_ffi_core::for_longdouble!(tylist; LONGDOUBLE);
xpushmem_ffi_core::for_amo_std_types!(tylist; AMO_STD);
xpushmem_ffi_core::for_amo_float_types!(tylist; AMO_FLOAT);
xpushmem_ffi_core::for_sync16_types!(tylist; SYNC16);
xpushmem_ffi_core::for_amo_bitwise_types!(tylist; AMO_BITWISE);
pub const SIZES: &[(u32, u32)] = &[(8, 1), (16, 2), (32, 4), (64, 8), (128, 16)];

/// The result conventions of a layer.
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    /// Function prefix (`xpushmem`, `shmem`).
    pub p: &'static str,
    /// Result type of calls whose standard signature is `void` (`int` native, `void` OpenSHMEM).
    pub r: &'static str,
    /// Suffix of the out-parameter variants of fetching AMOs (`_ex` native, `_nbi` OpenSHMEM).
    pub ex: &'static str,
    /// Their result type.
    pub exr: &'static str,
}

pub const NATIVE: Layer = Layer {
    p: "xpushmem",
    r: "int",
    ex: "_ex",
    exr: "int",
};

pub const OSHMEM: Layer = Layer {
    p: "shmem",
    r: "void",
    ex: "_nbi",
    exr: "void",
};

fn fill(t: &str, l: &Layer, ty: Option<&Ty>) -> String {
    let mut s = t
        .replace("{P}", l.p)
        .replace("{R}", l.r)
        .replace("{EXR}", l.exr)
        .replace("{EX}", l.ex);
    if let Some(ty) = ty {
        s = s.replace("{N}", ty.n).replace("{T}", ty.c);
    }
    s
}

/// `doc` as a comment, then every template for every type.
fn family(out: &mut String, doc: &str, l: &Layer, types: &[Ty], templates: &[&str]) {
    out.push_str(&format!("\n/* {} */\n", fill(doc, l, None)));
    for ty in types {
        for t in templates {
            out.push_str(&fill(t, l, Some(ty)));
            out.push('\n');
        }
    }
}

pub const RMA_TYPED: &[&str] = &[
    "{R} {P}_{N}_put({T} *dest, const {T} *source, size_t nelems, int pe);",
    "{R} {P}_{N}_get({T} *dest, const {T} *source, size_t nelems, int pe);",
    "{R} {P}_{N}_put_nbi({T} *dest, const {T} *source, size_t nelems, int pe);",
    "{R} {P}_{N}_get_nbi({T} *dest, const {T} *source, size_t nelems, int pe);",
    "{R} {P}_{N}_iput({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);",
    "{R} {P}_{N}_iget({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);",
    "{R} {P}_{N}_put_signal({T} *dest, const {T} *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
    "{R} {P}_{N}_put_signal_nbi({T} *dest, const {T} *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
];
/// OpenSHMEM 1.6's interleaved block transfers, typed.
pub const RMA_IB_TYPED: &[&str] = &[
    "void {P}_{N}_ibput({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe);",
    "void {P}_{N}_ibget({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe);",
];
/// The same, sized.
pub const RMA_IB_SIZED: &[&str] = &[
    "void {P}_ibput{B}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe);",
    "void {P}_ibget{B}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, size_t nblocks, int pe);",
];
/// The guard of the declarations with C's complex types: C, and the C++ compilers that accept `_Complex` as an
/// extension (g++, clang++: both define `__GNUC__`), as C++ programs of the public test suite use them.
const COMPLEX_GUARD: &str = "#if !defined(__cplusplus) || defined(__GNUC__)\n";
/// OpenSHMEM 1.6's other additions (their declarations and the session type and constants).
const OSHMEM_16: &str = r#"
/* OpenSHMEM 1.6: signal updates without data, per-PE quiet, sessions (hints: this transport completes every
 * operation when it returns), the initialisation query */
void shmem_signal_add(uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_add(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_signal_set(uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_ctx_signal_set(shmem_ctx_t ctx, uint64_t *sig_addr, uint64_t signal, int pe);
void shmem_pe_quiet(const int *target_pes, size_t npes);
void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int *target_pes, size_t npes);
typedef struct {
    size_t total_ops;
} shmem_ctx_session_config_t;
#define SHMEM_CTX_SESSION_TOTAL_OPS (1L << 0)
#define SHMEM_CTX_SESSION_BATCH (1L << 0)
void shmem_ctx_session_start(shmem_ctx_t ctx, long options, const shmem_ctx_session_config_t *config, long config_mask);
void shmem_ctx_session_stop(shmem_ctx_t ctx);
void shmem_query_initialized(int *initialized);
"#;
pub const RMA_PG: &[&str] = &[
    "{R} {P}_{N}_p({T} *dest, {T} value, int pe);",
    "{T} {P}_{N}_g(const {T} *source, int pe);",
];
pub const RMA_G_EX: &[&str] = &["int {P}_{N}_g_ex({T} *value, const {T} *source, int pe);"];
pub const RMA_SIZED: &[&str] = &[
    "{R} {P}_put{B}(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_get{B}(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_put{B}_nbi(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_get{B}_nbi(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_iput{B}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);",
    "{R} {P}_iget{B}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe);",
    "{R} {P}_put{B}_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
    "{R} {P}_put{B}_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
];
pub const RMA_MEM: &[&str] = &[
    "{R} {P}_putmem(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_getmem(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);",
    "{R} {P}_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
    "{R} {P}_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);",
];
pub const AMO_EXT: &[&str] = &[
    "{T} {P}_{N}_atomic_fetch(const {T} *source, int pe);",
    "{EXR} {P}_{N}_atomic_fetch{EX}({T} *fetch, const {T} *source, int pe);",
    "{R} {P}_{N}_atomic_set({T} *dest, {T} value, int pe);",
    "{T} {P}_{N}_atomic_swap({T} *dest, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_swap{EX}({T} *fetch, {T} *dest, {T} value, int pe);",
];
pub const AMO_STD_T: &[&str] = &[
    "{T} {P}_{N}_atomic_compare_swap({T} *dest, {T} cond, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_compare_swap{EX}({T} *fetch, {T} *dest, {T} cond, {T} value, int pe);",
    "{T} {P}_{N}_atomic_fetch_inc({T} *dest, int pe);",
    "{EXR} {P}_{N}_atomic_fetch_inc{EX}({T} *fetch, {T} *dest, int pe);",
    "{R} {P}_{N}_atomic_inc({T} *dest, int pe);",
    "{T} {P}_{N}_atomic_fetch_add({T} *dest, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_fetch_add{EX}({T} *fetch, {T} *dest, {T} value, int pe);",
    "{R} {P}_{N}_atomic_add({T} *dest, {T} value, int pe);",
];
pub const AMO_BITWISE_T: &[&str] = &[
    "{T} {P}_{N}_atomic_fetch_and({T} *dest, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_fetch_and{EX}({T} *fetch, {T} *dest, {T} value, int pe);",
    "{R} {P}_{N}_atomic_and({T} *dest, {T} value, int pe);",
    "{T} {P}_{N}_atomic_fetch_or({T} *dest, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_fetch_or{EX}({T} *fetch, {T} *dest, {T} value, int pe);",
    "{R} {P}_{N}_atomic_or({T} *dest, {T} value, int pe);",
    "{T} {P}_{N}_atomic_fetch_xor({T} *dest, {T} value, int pe);",
    "{EXR} {P}_{N}_atomic_fetch_xor{EX}({T} *fetch, {T} *dest, {T} value, int pe);",
    "{R} {P}_{N}_atomic_xor({T} *dest, {T} value, int pe);",
];
pub const SYNC_T: &[&str] = &[
    "{R} {P}_{N}_wait_until({T} *ivar, int cmp, {T} cmp_value);",
    "{R} {P}_{N}_wait_until_all({T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "size_t {P}_{N}_wait_until_any({T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "size_t {P}_{N}_wait_until_some({T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} cmp_value);",
    "{R} {P}_{N}_wait_until_all_vector({T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "size_t {P}_{N}_wait_until_any_vector({T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "size_t {P}_{N}_wait_until_some_vector({T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} *cmp_values);",
    "int {P}_{N}_test({T} *ivar, int cmp, {T} cmp_value);",
    "int {P}_{N}_test_all({T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "size_t {P}_{N}_test_any({T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "size_t {P}_{N}_test_some({T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_test_all_vector({T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "size_t {P}_{N}_test_any_vector({T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "size_t {P}_{N}_test_some_vector({T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} *cmp_values);",
];
pub const SYNC_EX: &[&str] = &[
    "int {P}_{N}_test_ex(int *result, {T} *ivar, int cmp, {T} cmp_value);",
    "int {P}_{N}_wait_until_any_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_wait_until_any_vector_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "int {P}_{N}_wait_until_some_ex(size_t *result, {T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_wait_until_some_vector_ex(size_t *result, {T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} *cmp_values);",
    "int {P}_{N}_test_all_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_test_all_vector_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "int {P}_{N}_test_any_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_test_any_vector_ex(size_t *result, {T} *ivars, size_t nelems, const int *status, int cmp, {T} *cmp_values);",
    "int {P}_{N}_test_some_ex(size_t *result, {T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} cmp_value);",
    "int {P}_{N}_test_some_vector_ex(size_t *result, {T} *ivars, size_t nelems, size_t *indices, const int *status, int cmp, {T} *cmp_values);",
];

/// The families common to both layers (RMA, AMO, point-to-point synchronisation).
pub fn common(out: &mut String, l: &Layer) {
    family(
        out,
        "RMA, typed: {P}_TYPENAME_{put,get}[_nbi], _iput, _iget, _put_signal[_nbi]",
        l,
        RMA,
        RMA_TYPED,
    );
    family(
        out,
        "RMA, long double (pointer forms)",
        l,
        LONGDOUBLE,
        RMA_TYPED,
    );
    family(
        out,
        "RMA, single elements: {P}_TYPENAME_p, {P}_TYPENAME_g",
        l,
        RMA,
        RMA_PG,
    );
    out.push_str(
        "\n/* RMA, sized: {P}_put{8,16,32,64,128}, ... (nelems counts elements of that size) */\n"
            .replace("{P}", l.p)
            .as_str(),
    );
    for (bits, _) in SIZES {
        for t in RMA_SIZED {
            out.push_str(&fill(t, l, None).replace("{B}", &bits.to_string()));
            out.push('\n');
        }
    }
    family(
        out,
        "RMA, bytes: {P}_putmem, ... (nelems counts bytes)",
        l,
        &[],
        &[],
    );
    for t in RMA_MEM {
        out.push_str(&fill(t, l, None));
        out.push('\n');
    }
    family(
        out,
        "Atomics: fetch, set, swap (standard and extended AMO types)",
        l,
        AMO_STD,
        AMO_EXT,
    );
    family(
        out,
        "Atomics on float and double: fetch, set, swap",
        l,
        AMO_FLOAT,
        AMO_EXT,
    );
    family(
        out,
        "Atomics: compare_swap, fetch_inc, inc, fetch_add, add (standard AMO types)",
        l,
        AMO_STD,
        AMO_STD_T,
    );
    family(
        out,
        "Atomics, bitwise: and, or, xor",
        l,
        AMO_BITWISE,
        AMO_BITWISE_T,
    );
    family(
        out,
        "Point-to-point synchronisation (CMP_* operators; status: non-zero = skip, NULL = none)",
        l,
        AMO_STD,
        SYNC_T,
    );
    if l.p == OSHMEM.p {
        family(
            out,
            "Point-to-point synchronisation on short and unsigned short",
            l,
            SYNC16,
            SYNC_T,
        );
    }
}

/// The trailer of `xpushmem.h`: every macro-generated native declaration.
pub fn native_trailer() -> String {
    let l = NATIVE;
    let mut out = String::new();
    out.push_str("\n/* ---- Typed and sized families (generated from the type lists of xpushmem-ffi-core) ---- */\n");
    out.push_str("#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
    common(&mut out, &l);
    family(
        &mut out,
        "Value-returning calls with an error code: {P}_TYPENAME_g_ex",
        &l,
        RMA,
        RMA_G_EX,
    );
    family(&mut out, "{P}_longdouble_g_ex", &l, LONGDOUBLE, RMA_G_EX);
    family(&mut out, "Value-returning point-to-point calls with an error code (result through the first argument)", &l, AMO_STD, SYNC_EX);
    family(
        &mut out,
        "Collectives over teams (counts in elements; error code): broadcast, fcollect, collect, alltoall, alltoalls",
        &l,
        RMA,
        NATIVE_COLL_T,
    );
    family(
        &mut out,
        "Bitwise reductions and reduce-scatters (source of a reducescatter: n_pes * nelems elements)",
        &l,
        REDUCE_BITWISE,
        NATIVE_RED_BITWISE_T,
    );
    family(
        &mut out,
        "Arithmetic reductions and reduce-scatters",
        &l,
        REDUCE_ARITH,
        NATIVE_RED_ARITH_T,
    );
    family(
        &mut out,
        "Extensions: prefix sums (inclusive, exclusive)",
        &l,
        REDUCE_ARITH,
        NATIVE_SCAN_T,
    );
    family(
        &mut out,
        "Host on-queue forms (docs/DEVICE.md): appended to a Level Zero command list, after num_wait_events events of wait_events (a ze_event_handle_t array), signalling signal_event (NULL: none); device errors from xpushmemx_queue_wait",
        &l,
        RMA,
        ONQ_RMA_T,
    );
    family(
        &mut out,
        "On-queue bytes, signals, quiet, barriers and byte collectives (see ffi/core/src/onqueue.rs)",
        &l,
        &[],
        &[],
    );
    for t in ONQ_UNTYPED {
        out.push_str(t);
        out.push('\n');
    }
    family(
        &mut out,
        "On-queue point-to-point waits",
        &l,
        AMO_STD,
        ONQ_WAIT_T,
    );
    family(
        &mut out,
        "On-queue bitwise reductions (dest must not overlap source)",
        &l,
        REDUCE_BITWISE,
        ONQ_RED_BITWISE_T,
    );
    family(
        &mut out,
        "On-queue arithmetic reductions and prefix sums (dest must not overlap source)",
        &l,
        REDUCE_ARITH,
        ONQ_RED_ARITH_T,
    );
    out.push_str(
        "\n/* long double cannot cross the Rust ABI by value: _p and _g are inline wrappers of _put/_get. */\n\
static inline int xpushmem_longdouble_p(long double *dest, long double value, int pe) {\n\
    return xpushmem_longdouble_put(dest, &value, 1, pe);\n\
}\n\
static inline long double xpushmem_longdouble_g(const long double *source, int pe) {\n\
    long double v = 0;\n\
    (void)xpushmem_longdouble_get(&v, source, 1, pe);\n\
    return v;\n\
}\n",
    );
    out.push_str(
        "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif /* XPUSHMEM_H */\n",
    );
    out
}

/// Every function name a header declares (`NAME(` after a type), inline wrappers excluded.
pub fn declared_functions(header: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for line in header.lines() {
        let l = line.trim_start();
        if l.starts_with("static inline")
            || l.starts_with('#')
            || l.starts_with("/*")
            || l.starts_with('*')
            || l.starts_with("//")
        {
            continue;
        }
        // `void (name)(...)`: a function declared in parentheses so that a macro of the same name does not apply.
        let unwrapped;
        let l = match (l.find(" ("), l.find(")(")) {
            (Some(a), Some(b))
                if a < b && l[a + 2..b].chars().all(|c| c.is_alphanumeric() || c == '_') =>
            {
                unwrapped = format!("{} {}{}", &l[..a], &l[a + 2..b], &l[b + 1..]);
                unwrapped.as_str()
            }
            _ => l,
        };
        if let Some(open) = l.find('(') {
            let head = &l[..open];
            if head.is_empty()
                || !head
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == ' ' || c == '*')
            {
                continue;
            }
            let name = head.rsplit([' ', '*']).next().unwrap_or("");
            if !name.is_empty() && name.len() < head.len() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

xpushmem_ffi_core::for_reduce_bitwise_types!(tylist; REDUCE_BITWISE);
xpushmem_ffi_core::for_reduce_arith_types!(tylist; REDUCE_ARITH);

/// `T *x, ...` -> the context form: `{P}_ctx_...(shmem_ctx_t ctx, ...)`.
fn ctx_form(t: &str) -> String {
    t.replacen("{P}_", "{P}_ctx_", 1)
        .replacen('(', "(shmem_ctx_t ctx, ", 1)
}

fn ctx_family(out: &mut String, doc: &str, l: &Layer, types: &[Ty], templates: &[&str]) {
    let t: Vec<String> = templates.iter().map(|t| ctx_form(t)).collect();
    let t: Vec<&str> = t.iter().map(|s| s.as_str()).collect();
    family(out, doc, l, types, &t);
}

/// C types of the C11 generic selections, with their TYPENAME.
const GEN_RMA: &[(&str, &str)] = &[
    ("float", "float"),
    ("double", "double"),
    ("long double", "longdouble"),
    ("char", "char"),
    ("signed char", "schar"),
    ("short", "short"),
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("unsigned char", "uchar"),
    ("unsigned short", "ushort"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
];
const GEN_AMO: &[(&str, &str)] = &[
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
];
const GEN_SYNC: &[(&str, &str)] = &[
    ("short", "short"),
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("unsigned short", "ushort"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
];
const GEN_OLD_AMO: &[(&str, &str)] = &[("int", "int"), ("long", "long"), ("long long", "longlong")];
const GEN_OLD_AMO_EXT: &[(&str, &str)] = &[
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("float", "float"),
    ("double", "double"),
];
const GEN_AMO_EXT: &[(&str, &str)] = &[
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
    ("float", "float"),
    ("double", "double"),
];
const GEN_BITWISE: &[(&str, &str)] = &[
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
    ("int", "int32"),
    ("long", "int64"),
];
const GEN_RED_BITWISE: &[(&str, &str)] = &[
    ("unsigned char", "uchar"),
    ("unsigned short", "ushort"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
    ("signed char", "int8"),
    ("short", "int16"),
    ("int", "int32"),
    ("long", "int64"),
];
const GEN_RED_ARITH: &[(&str, &str)] = &[
    ("char", "char"),
    ("signed char", "schar"),
    ("short", "short"),
    ("int", "int"),
    ("long", "long"),
    ("long long", "longlong"),
    ("unsigned char", "uchar"),
    ("unsigned short", "ushort"),
    ("unsigned int", "uint"),
    ("unsigned long", "ulong"),
    ("unsigned long long", "ulonglong"),
    ("float", "float"),
    ("double", "double"),
    ("long double", "longdouble"),
];

/// A generic name `shmem_NAME`: `_Generic` on the pointed-to type of argument `sel` (1-based); with `ctx`, the
/// same with a leading context argument, told apart by the number of arguments (`nargs` without the context).
fn generic(
    out: &mut String,
    name: &str,
    sel: usize,
    nargs: usize,
    ctx: bool,
    types: &[(&str, &str)],
) {
    let assoc = |prefix: &str| {
        types
            .iter()
            .map(|(c, n)| format!("{c}: {prefix}_{n}_{name}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "#define shmemi_g_{name}(...) _Generic(*(SHMEMI_A{sel}(__VA_ARGS__, ~)), {})(__VA_ARGS__)\n",
        assoc("shmem")
    ));
    if ctx {
        out.push_str(&format!(
            "#define shmemi_gc_{name}(...) _Generic(*(SHMEMI_A{}(__VA_ARGS__, ~)), {})(__VA_ARGS__)\n",
            sel + 1,
            assoc("shmem_ctx")
        ));
        out.push_str(&format!(
            "#define shmem_{name}(...) SHMEMI_A{}(__VA_ARGS__, shmemi_gc_{name}, shmemi_g_{name}, ~)(__VA_ARGS__)\n",
            nargs + 2
        ));
    } else {
        out.push_str(&format!(
            "#define shmem_{name}(...) shmemi_g_{name}(__VA_ARGS__)\n"
        ));
    }
}

const OSHMEM_PROLOGUE: &str = r#"/* shmem.h: the OpenSHMEM 1.6 interface of xpushmem (libxpushmem_oshmem).
 *
 * GENERATED by ffi/gen-header.sh from the type lists of xpushmem-ffi-core. Do not edit: a test fails when this
 * file drifts from the generator, and another when it declares other functions than the library exports.
 * Installed as <prefix>/include/xpushmem/shmem.h so that it never shadows a system OpenSHMEM; compile with
 *     cc prog.c $(pkg-config --cflags --libs xpushmem-oshmem)
 * and run with xpushmem-run -n N ./a.out. What is supported, and what is not, is in docs/OPENSHMEM.md.
 *
 * Errors: the standard calls that return void abort with a message on error (classic SHMEM behaviour) unless
 * XPUSHMEM_ERROR_MODE=return, in which case they return and xpushmem_last_error() has the message.
 */
#ifndef XPUSHMEM_SHMEM_H
#define XPUSHMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 6
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "xpushmem"

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

#define SHMEM_CTX_PRIVATE 1
#define SHMEM_CTX_SERIALIZED 2
#define SHMEM_CTX_NOSTORE 4

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

#define SHMEM_TEAM_NUM_CONTEXTS 1L

typedef struct shmemi_ctx *shmem_ctx_t;
typedef struct shmemi_team *shmem_team_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;

#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)(uintptr_t)1)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)(uintptr_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)(uintptr_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)(uintptr_t)2)
#define SHMEM_TEAM_INVALID ((shmem_team_t)(uintptr_t)0)

/* Library setup, exit, and query */
void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* Memory management (collective) */
void *shmem_malloc(size_t size);
void *shmem_malloc_with_hints(size_t size, long hints);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);

/* Teams */
int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size, const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t *xaxis_config, long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config, long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* Contexts: every operation completes before it returns on this transport, so a context is an ordering domain
 * with nothing to hold; its fence and quiet are the global ones. */
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);

/* Memory ordering, barriers, signals */
void shmem_fence(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_quiet(void);
void shmem_ctx_quiet(shmem_ctx_t ctx);
void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* Distributed locking (the lock word lives on PE 0) */
void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* Collectives (0 on success); data-movement collectives */
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);

/* The extension calls of libxpushmem that the OpenSHMEM library exports too. Error mode: abort by default, from
 * the first call (before shmem_init included), unless XPUSHMEM_ERROR_MODE=return or xpushmemx_set_error_mode. */
#define XPUSHMEMX_ERROR_MODE_RETURN 0
#define XPUSHMEMX_ERROR_MODE_ABORT 1
const char *xpushmem_last_error(void);
int xpushmem_last_error_code(void);
int xpushmemx_set_error_mode(int mode);
int xpushmemx_get_error_mode(void);
"#;

pub const COLL_T: &[&str] = &[
    "int shmem_{N}_broadcast(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems, int PE_root);",
    "int shmem_{N}_collect(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int shmem_{N}_fcollect(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int shmem_{N}_alltoall(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int shmem_{N}_alltoalls(shmem_team_t team, {T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);",
];
pub const RED_BITWISE_T: &[&str] = &[
    "int shmem_{N}_and_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int shmem_{N}_or_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int shmem_{N}_xor_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
];
pub const RED_ARITH_T: &[&str] = &[
    "int shmem_{N}_min_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int shmem_{N}_max_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int shmem_{N}_sum_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int shmem_{N}_prod_reduce(shmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
];

pub const NATIVE_COLL_T: &[&str] = &[
    "int xpushmem_{N}_broadcast(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, int PE_root);",
    "int xpushmem_{N}_fcollect(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_collect(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_alltoall(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_alltoalls(xpushmem_team_t team, {T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems);",
];
pub const NATIVE_RED_BITWISE_T: &[&str] = &[
    "int xpushmem_{N}_and_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_and_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_or_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_or_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_xor_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_xor_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
];
pub const NATIVE_RED_ARITH_T: &[&str] = &[
    "int xpushmem_{N}_min_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_min_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_max_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_max_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_sum_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_sum_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmem_{N}_prod_reduce(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce);",
    "int xpushmem_{N}_prod_reducescatter(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
];
/// The host on-queue forms (`ffi/core/src/onqueue.rs`): every typed family's trailing list and events.
pub const ONQ_RMA_T: &[&str] = &[
    "int xpushmemx_{N}_put_on_queue({T} *dest, const {T} *source, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_get_on_queue({T} *dest, const {T} *source, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_put_nbi_on_queue({T} *dest, const {T} *source, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_get_nbi_on_queue({T} *dest, const {T} *source, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_iput_on_queue({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_iget_on_queue({T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_put_signal_on_queue({T} *dest, const {T} *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_broadcast_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, int pe_root, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_fcollect_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_collect_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_alltoall_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_alltoalls_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
];
/// The untyped on-queue entry points generated by `onq_untyped!` (`ffi/core/src/onqueue.rs`).
pub const ONQ_UNTYPED: &[&str] = &[
    "int xpushmemx_putmem_on_queue(void *dest, const void *source, size_t nbytes, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_getmem_on_queue(void *dest, const void *source, size_t nbytes, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_putmem_nbi_on_queue(void *dest, const void *source, size_t nbytes, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_getmem_nbi_on_queue(void *dest, const void *source, size_t nbytes, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_putmem_signal_on_queue(void *dest, const void *source, size_t nbytes, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_putmem_signal_nbi_on_queue(void *dest, const void *source, size_t nbytes, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_signal_set_on_queue(uint64_t *sig_addr, uint64_t signal, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_signal_add_on_queue(uint64_t *sig_addr, uint64_t signal, int pe, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_quiet_on_queue(void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_barrier_all_on_queue(void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_sync_all_on_queue(void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_fcollectmem_on_queue(xpushmem_team_t team, void *dest, const void *source, size_t nbytes, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_collectmem_on_queue(xpushmem_team_t team, void *dest, const void *source, size_t nbytes, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_alltoallmem_on_queue(xpushmem_team_t team, void *dest, const void *source, size_t nbytes, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
];
pub const ONQ_WAIT_T: &[&str] =
    &["int xpushmemx_{N}_wait_until_on_queue({T} *ivar, int cmp, {T} cmp_value, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);"];
pub const ONQ_RED_BITWISE_T: &[&str] = &[
    "int xpushmemx_{N}_and_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_or_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_xor_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
];
pub const ONQ_RED_ARITH_T: &[&str] = &[
    "int xpushmemx_{N}_min_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_max_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_sum_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_prod_reduce_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nreduce, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_sum_inscan_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
    "int xpushmemx_{N}_sum_exscan_on_queue(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems, void *ze_command_list, uint32_t num_wait_events, const void *wait_events, void *signal_event);",
];

pub const NATIVE_SCAN_T: &[&str] = &[
    "int xpushmemx_{N}_sum_inscan(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
    "int xpushmemx_{N}_sum_exscan(xpushmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
];

/// The whole of `shmem.h`.
/// The deprecated active-set collectives (OpenSHMEM 1.4) and their constants (`ffi/oshmem/src/activeset.rs`).
fn active_set(out: &mut String) {
    out.push_str(
        "\n/* Deprecated active-set collectives (OpenSHMEM 1.4): the PEs PE_start + i * 2^logPE_stride, i < PE_size, and a\n \
         * symmetric pSync array of the given size holding SHMEM_SYNC_VALUE (pWrk is not used) */\n\
         #define SHMEM_SYNC_VALUE 0L\n",
    );
    for c in [
        "SYNC",
        "BARRIER_SYNC",
        "BCAST_SYNC",
        "COLLECT_SYNC",
        "REDUCE_SYNC",
        "ALLTOALL_SYNC",
        "ALLTOALLS_SYNC",
    ] {
        out.push_str(&format!("#define SHMEM_{c}_SIZE 3\n"));
    }
    out.push_str("#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1\n");
    out.push_str("void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);\n");
    // The C binding of shmem_sync is the active-set form (deprecated; as in Sandia OpenSHMEM and Open MPI); the
    // team form `shmem_sync(team)` is C11's, a macro choosing shmem_team_sync by the number of arguments.
    out.push_str("void (shmem_sync)(int PE_start, int logPE_stride, int PE_size, long *pSync);\n");
    for bits in [32, 64] {
        out.push_str(&format!("void shmem_broadcast{bits}(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync);\n"));
        for name in ["fcollect", "collect", "alltoall"] {
            out.push_str(&format!("void shmem_{name}{bits}(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync);\n"));
        }
        out.push_str(&format!("void shmem_alltoalls{bits}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync);\n"));
    }
    let all = ["and", "or", "xor", "min", "max", "sum", "prod"];
    let types: [(&str, &str, &[&str]); 9] = [
        ("short", "short", &all),
        ("int", "int", &all),
        ("long", "long", &all),
        ("longlong", "long long", &all),
        ("float", "float", &all[3..]),
        ("double", "double", &all[3..]),
        ("longdouble", "long double", &all[3..]),
        ("complexf", "float _Complex", &all[5..]),
        ("complexd", "double _Complex", &all[5..]),
    ];
    for (n, t, ops) in types {
        let complex = t.ends_with("_Complex");
        if complex {
            out.push_str(COMPLEX_GUARD);
        }
        for op in ops {
            out.push_str(&format!("void shmem_{n}_{op}_to_all({t} *dest, const {t} *source, int nreduce, int PE_start, int logPE_stride, int PE_size, {t} *pWrk, long *pSync);\n"));
        }
        if complex {
            out.push_str("#endif\n");
        }
    }
}

/// Names from before OpenSHMEM 1.5 that programs still use (`ffi/oshmem/src/legacy.rs`).
fn legacy(out: &mut String) {
    out.push_str(
        r#"
/* Deprecated names from before OpenSHMEM 1.5, kept for old programs (ffi/oshmem/src/legacy.rs) */
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void *dest);
void shmem_set_cache_line_inv(void *dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void *dest);
void shmem_wait(long *ivar, long cmp_value);
void (shmem_wait_until)(long *ivar, int cmp, long cmp_value);
"#,
    );
    for (n, t) in [
        ("short", "short"),
        ("int", "int"),
        ("long", "long"),
        ("longlong", "long long"),
    ] {
        out.push_str(&format!("void shmem_{n}_wait({t} *ivar, {t} cmp_value);\n"));
    }
    for (n, t) in [("int", "int"), ("long", "long"), ("longlong", "long long")] {
        out.push_str(&format!(
            "{t} shmem_{n}_fadd({t} *dest, {t} value, int pe);\n\
             {t} shmem_{n}_finc({t} *dest, int pe);\n\
             void shmem_{n}_add({t} *dest, {t} value, int pe);\n\
             void shmem_{n}_inc({t} *dest, int pe);\n\
             {t} shmem_{n}_cswap({t} *dest, {t} cond, {t} value, int pe);\n"
        ));
    }
    for (n, t) in [
        ("int", "int"),
        ("long", "long"),
        ("longlong", "long long"),
        ("float", "float"),
        ("double", "double"),
    ] {
        out.push_str(&format!(
            "{t} shmem_{n}_swap({t} *dest, {t} value, int pe);\n\
             {t} shmem_{n}_fetch(const {t} *source, int pe);\n\
             void shmem_{n}_set({t} *dest, {t} value, int pe);\n"
        ));
    }
}

/// The profiling interface's control call (OpenSHMEM 1.5, annex "Profiling Interface"): a library routine, so a
/// profiling tool can define its own.
const PCONTROL: &str = "
/* Profiling control: a no-op in the library; a profiling tool defines its own shmem_pcontrol and reaches the
 * library through the pshmem_* names of pshmem.h. */
void shmem_pcontrol(const int level, ...);
";

/// The `static inline` routines of `shmem.h`; `pshmem.h` has the same with every `shmem_` name shifted.
const LONGDOUBLE_INLINE: &str = "/* long double cannot cross the Rust ABI by value: its p and g are inline wrappers of put and get. */
static inline void shmem_longdouble_p(long double *dest, long double value, int pe) {
    shmem_longdouble_put(dest, &value, 1, pe);
}
static inline long double shmem_longdouble_g(const long double *source, int pe) {
    long double v = 0;
    shmem_longdouble_get(&v, source, 1, pe);
    return v;
}
static inline void shmem_ctx_longdouble_p(shmem_ctx_t ctx, long double *dest, long double value, int pe) {
    shmem_ctx_longdouble_put(ctx, dest, &value, 1, pe);
}
static inline long double shmem_ctx_longdouble_g(shmem_ctx_t ctx, const long double *source, int pe) {
    long double v = 0;
    shmem_ctx_longdouble_get(ctx, &v, source, 1, pe);
    return v;
}
";

/// The name-shifted name of an OpenSHMEM routine (profiling interface): `p` in front, as Sandia OpenSHMEM and
/// Open MPI do for the deprecated names too (`pstart_pes`, `p_my_pe`, `pshmalloc`).
pub fn pshmem_name(name: &str) -> String {
    format!("p{name}")
}

/// `pshmem.h`, generated from `shmem.h`: every routine `shmem.h` declares (the native `xpushmem_*` ones aside)
/// under its name-shifted name, with the same signature and preprocessor guards, and the `static inline`
/// routines with their names and calls shifted. Types and constants come from `shmem.h`, which it includes.
pub fn pshmem_header() -> String {
    let shmem = oshmem_header();
    let mut out = String::from(PSHMEM_PROLOGUE);
    let start = shmem
        .find("/* Library setup")
        .expect("shmem.h's first section");
    let end = shmem
        .find(LONGDOUBLE_INLINE)
        .expect("shmem.h's inline routines");
    for line in shmem[start..end].lines() {
        let t = line.trim_start();
        if t.starts_with("#if") || t.starts_with("#endif") {
            out.push_str(line);
            out.push('\n');
        } else if t.starts_with("/*") && t.ends_with("*/") {
            out.push('\n');
            out.push_str(line);
            out.push('\n');
        } else if let Some(name) = declared_functions(line).into_iter().next() {
            if name.starts_with("xpushmem") {
                continue;
            }
            // `void (shmem_wait_until)(...)` is parenthesised against the generic macro of the same name;
            // pshmem_ names have no macros.
            let shifted = line
                .replacen(
                    &format!("({name})("),
                    &format!("{}(", pshmem_name(&name)),
                    1,
                )
                .replacen(
                    &format!(" {name}("),
                    &format!(" {}(", pshmem_name(&name)),
                    1,
                )
                .replacen(
                    &format!("*{name}("),
                    &format!("*{}(", pshmem_name(&name)),
                    1,
                );
            assert!(shifted.contains(&pshmem_name(&name)), "cannot shift {line}");
            out.push_str(&shifted);
            out.push('\n');
        }
    }
    out.push('\n');
    // The routine names, not the types (`shmem_ctx_t`): each name follows a space.
    out.push_str(&LONGDOUBLE_INLINE.replace(" shmem_", " pshmem_"));
    out.push_str(
        "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif /* XPUSHMEM_PSHMEM_H */\n",
    );
    out
}

const PSHMEM_PROLOGUE: &str = "/* pshmem.h: the OpenSHMEM profiling interface of xpushmem (libxpushmem_oshmem).
 *
 * GENERATED by ffi/gen-header.sh from shmem.h. Do not edit: a test fails when this file drifts from the
 * generator, and another when a routine the library exports lacks its pshmem_ twin here.
 *
 * Every routine of shmem.h also exists under its name-shifted name, pshmem_NAME (the deprecated names: pstart_pes,
 * p_my_pe, p_num_pes, pshmalloc, pshfree, pshrealloc, pshmemalign). pshmem_NAME always reaches the library's
 * implementation; shmem_NAME is a weak symbol, so a profiling tool may define shmem_NAME itself (in the program or
 * a library linked before libxpushmem_oshmem, shared or static) and call pshmem_NAME from it. The C11
 * type-generic macros of shmem.h have no pshmem_ forms (they are macros, as the specification notes); the
 * static inline routines have pshmem_ twins below, which a tool cannot replace either.
 */
#ifndef XPUSHMEM_PSHMEM_H
#define XPUSHMEM_PSHMEM_H

#include \"shmem.h\"

#ifdef __cplusplus
extern \"C\" {
#endif
";

pub fn oshmem_header() -> String {
    let l = OSHMEM;
    let mut out = String::from(OSHMEM_PROLOGUE);
    common(&mut out, &l);
    ctx_family(&mut out, "RMA on a context", &l, RMA, RMA_TYPED);
    ctx_family(
        &mut out,
        "RMA on a context, long double",
        &l,
        LONGDOUBLE,
        RMA_TYPED,
    );
    ctx_family(&mut out, "p and g on a context", &l, RMA, RMA_PG);
    out.push_str("\n/* Sized RMA on a context */\n");
    for (bits, _) in SIZES {
        for t in RMA_SIZED {
            out.push_str(&fill(&ctx_form(t), &l, None).replace("{B}", &bits.to_string()));
            out.push('\n');
        }
    }
    out.push_str("\n/* Byte RMA on a context */\n");
    for t in RMA_MEM {
        out.push_str(&fill(&ctx_form(t), &l, None));
        out.push('\n');
    }
    ctx_family(
        &mut out,
        "Atomics on a context: fetch, set, swap",
        &l,
        AMO_STD,
        AMO_EXT,
    );
    ctx_family(
        &mut out,
        "Atomics on a context: float and double",
        &l,
        AMO_FLOAT,
        AMO_EXT,
    );
    ctx_family(
        &mut out,
        "Atomics on a context: compare_swap, inc, add",
        &l,
        AMO_STD,
        AMO_STD_T,
    );
    ctx_family(
        &mut out,
        "Atomics on a context: bitwise",
        &l,
        AMO_BITWISE,
        AMO_BITWISE_T,
    );
    family(&mut out, "Typed data-movement collectives", &l, RMA, COLL_T);
    family(
        &mut out,
        "Bitwise reductions",
        &l,
        REDUCE_BITWISE,
        RED_BITWISE_T,
    );
    family(
        &mut out,
        "Arithmetic reductions",
        &l,
        REDUCE_ARITH,
        RED_ARITH_T,
    );
    family(
        &mut out,
        "long double: data-movement collectives (moved as bytes) and reductions (folded in member order)",
        &l,
        LONGDOUBLE,
        &[COLL_T, RED_ARITH_T].concat(),
    );
    out.push_str(&format!(
        "\n/* Complex reductions over teams (folded in member order) */\n{COMPLEX_GUARD}"
    ));
    for (n, t) in [
        ("complexf", "float _Complex"),
        ("complexd", "double _Complex"),
    ] {
        for op in ["sum", "prod"] {
            out.push_str(&format!("int shmem_{n}_{op}_reduce(shmem_team_t team, {t} *dest, const {t} *source, size_t nreduce);\n"));
        }
    }
    out.push_str("#endif\n");
    family(
        &mut out,
        "OpenSHMEM 1.6: interleaved block transfers",
        &l,
        &[RMA, LONGDOUBLE].concat(),
        RMA_IB_TYPED,
    );
    ctx_family(
        &mut out,
        "OpenSHMEM 1.6: interleaved block transfers on a context",
        &l,
        &[RMA, LONGDOUBLE].concat(),
        RMA_IB_TYPED,
    );
    out.push_str(
        "\n/* OpenSHMEM 1.6: sized interleaved block transfers, plain and on a context */\n",
    );
    for (bits, _) in SIZES {
        for t in RMA_IB_SIZED {
            for form in [t.to_string(), ctx_form(t)] {
                out.push_str(&fill(&form, &l, None).replace("{B}", &bits.to_string()));
                out.push('\n');
            }
        }
    }
    family(
        &mut out,
        "OpenSHMEM 1.6: prefix sums over teams (the SUM types of the team reductions; long double folded in member order)",
        &l,
        &[REDUCE_ARITH, LONGDOUBLE].concat(),
        &[
            "int shmem_{N}_sum_inscan(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
            "int shmem_{N}_sum_exscan(shmem_team_t team, {T} *dest, const {T} *source, size_t nelems);",
        ],
    );
    out.push_str(&format!(
        "\n/* OpenSHMEM 1.6: complex prefix sums over teams (folded in member order) */\n{COMPLEX_GUARD}"
    ));
    for (n, t) in [
        ("complexf", "float _Complex"),
        ("complexd", "double _Complex"),
    ] {
        for k in ["inscan", "exscan"] {
            out.push_str(&format!("int shmem_{n}_sum_{k}(shmem_team_t team, {t} *dest, const {t} *source, size_t nelems);\n"));
        }
    }
    out.push_str("#endif\n");
    out.push_str(OSHMEM_16);
    active_set(&mut out);
    legacy(&mut out);
    out.push_str(PCONTROL);
    out.push('\n');
    out.push_str(LONGDOUBLE_INLINE);
    out.push_str(
        r#"
#ifdef __cplusplus
}  /* extern "C" */
#endif

/* C11 generic interfaces: the typed call is chosen from the pointed-to type; the forms with a leading context
 * argument are told apart by their number of arguments. */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define SHMEMI_A1(a1, ...) a1
#define SHMEMI_A2(a1, a2, ...) a2
#define SHMEMI_A3(a1, a2, a3, ...) a3
#define SHMEMI_A4(a1, a2, a3, a4, ...) a4
#define SHMEMI_A5(a1, a2, a3, a4, a5, ...) a5
#define SHMEMI_A6(a1, a2, a3, a4, a5, a6, ...) a6
#define SHMEMI_A7(a1, a2, a3, a4, a5, a6, a7, ...) a7
#define SHMEMI_A8(a1, a2, a3, a4, a5, a6, a7, a8, ...) a8
#define SHMEMI_A9(a1, a2, a3, a4, a5, a6, a7, a8, a9, ...) a9
"#,
    );
    for (name, nargs) in [
        ("put", 4),
        ("get", 4),
        ("put_nbi", 4),
        ("get_nbi", 4),
        ("iput", 6),
        ("iget", 6),
    ] {
        generic(&mut out, name, 1, nargs, true, GEN_RMA);
    }
    out.push_str(
        "/* shmem_sync(team) (C11) is shmem_team_sync; shmem_sync(PE_start, logPE_stride, PE_size, pSync) the\n \
         * deprecated active-set routine. */\n\
         #define shmem_sync(...) SHMEMI_A5(__VA_ARGS__, (shmem_sync), _, _, shmem_team_sync, _)(__VA_ARGS__)\n",
    );
    generic(&mut out, "ibput", 1, 7, true, GEN_RMA);
    generic(&mut out, "ibget", 1, 7, true, GEN_RMA);
    out.push_str(
        "/* shmem_signal_add/_set (1.6): with a leading context argument, the context form */\n\
         #define shmem_signal_add(...) SHMEMI_A5(__VA_ARGS__, shmem_ctx_signal_add, (shmem_signal_add), _)(__VA_ARGS__)\n\
         #define shmem_signal_set(...) SHMEMI_A5(__VA_ARGS__, shmem_ctx_signal_set, (shmem_signal_set), _)(__VA_ARGS__)\n",
    );
    generic(&mut out, "p", 1, 3, true, GEN_RMA);
    generic(&mut out, "g", 1, 2, true, GEN_RMA);
    generic(&mut out, "put_signal", 1, 7, true, GEN_RMA);
    generic(&mut out, "put_signal_nbi", 1, 7, true, GEN_RMA);
    for (name, nargs) in [("atomic_fetch", 2), ("atomic_set", 3), ("atomic_swap", 3)] {
        generic(&mut out, name, 1, nargs, true, GEN_AMO_EXT);
    }
    for (name, nargs) in [("atomic_fetch_nbi", 3), ("atomic_swap_nbi", 4)] {
        generic(&mut out, name, 1, nargs, true, GEN_AMO_EXT);
    }
    for (name, nargs) in [
        ("atomic_compare_swap", 4),
        ("atomic_fetch_inc", 2),
        ("atomic_inc", 2),
        ("atomic_fetch_add", 3),
        ("atomic_add", 3),
        ("atomic_compare_swap_nbi", 5),
        ("atomic_fetch_inc_nbi", 3),
        ("atomic_fetch_add_nbi", 4),
    ] {
        generic(&mut out, name, 1, nargs, true, GEN_AMO);
    }
    for op in ["and", "or", "xor"] {
        generic(
            &mut out,
            &format!("atomic_fetch_{op}"),
            1,
            3,
            true,
            GEN_BITWISE,
        );
        generic(&mut out, &format!("atomic_{op}"), 1, 3, true, GEN_BITWISE);
        generic(
            &mut out,
            &format!("atomic_fetch_{op}_nbi"),
            1,
            4,
            true,
            GEN_BITWISE,
        );
    }
    // Deprecated C11 generics of the pre-1.4 atomics (OpenSHMEM 1.3).
    for (name, nargs) in [
        ("fadd", 3),
        ("finc", 2),
        ("add", 3),
        ("inc", 2),
        ("cswap", 4),
    ] {
        generic(&mut out, name, 1, nargs, false, GEN_OLD_AMO);
    }
    for (name, nargs) in [("swap", 3), ("fetch", 2), ("set", 3)] {
        generic(&mut out, name, 1, nargs, false, GEN_OLD_AMO_EXT);
    }
    for name in [
        "wait_until",
        "wait_until_all",
        "wait_until_any",
        "wait_until_some",
        "wait_until_all_vector",
        "wait_until_any_vector",
        "wait_until_some_vector",
        "test",
        "test_all",
        "test_any",
        "test_some",
        "test_all_vector",
        "test_any_vector",
        "test_some_vector",
    ] {
        generic(&mut out, name, 1, 0, false, GEN_SYNC);
    }
    for name in ["broadcast", "collect", "fcollect", "alltoall", "alltoalls"] {
        generic(&mut out, name, 2, 0, false, GEN_RMA);
    }
    for op in ["and", "or", "xor"] {
        generic(
            &mut out,
            &format!("{op}_reduce"),
            2,
            0,
            false,
            GEN_RED_BITWISE,
        );
    }
    for op in ["min", "max"] {
        generic(
            &mut out,
            &format!("{op}_reduce"),
            2,
            0,
            false,
            GEN_RED_ARITH,
        );
    }
    let with_complex = [
        GEN_RED_ARITH,
        &[
            ("float _Complex", "complexf"),
            ("double _Complex", "complexd"),
        ],
    ]
    .concat();
    for op in ["sum", "prod"] {
        generic(
            &mut out,
            &format!("{op}_reduce"),
            2,
            0,
            false,
            &with_complex,
        );
    }
    for name in ["sum_inscan", "sum_exscan"] {
        generic(&mut out, name, 2, 0, false, &with_complex);
    }
    out.push_str("#endif /* C11 */\n\n#endif /* XPUSHMEM_SHMEM_H */\n");
    out
}
