//! `libxpushmem.so` carries its name as its SONAME, so that a program or Python extension linked against it is
//! satisfied by whichever copy of the library the process loaded first (`xpushmem.torch` loads the one
//! `XPUSHMEM_LIB_DIR` names before the wheel's prebuilt shim, whose run path points at the wheel's own copy).

fn main() {
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libxpushmem.so");
}
