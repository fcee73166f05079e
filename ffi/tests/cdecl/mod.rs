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
