//! The compiled-program cache: a SPIR-V module's OpenCL program binary (`CL_PROGRAM_BINARIES`), kept in a folder
//! (`ZE_EMU_PROGRAM_CACHE`; the test harness sets `<target>/ze-emu-cache`) and loaded with
//! `clCreateProgramWithBinary` instead of compiling the SPIR-V again. Intel's OpenCL CPU runtime compiles a large
//! module for seconds; every PE of every device test builds the same modules.
//!
//! An entry's name is the SHA-256 of the SPIR-V, the build options and the runtime (platform, device, driver and
//! OpenCL versions), so a new runtime or other options never meet an old binary. An entry is written to a temporary
//! file and renamed into place (readers see a whole entry or none), and it carries the SHA-256 of its binary: an
//! entry that is cut short, corrupt or refused by the runtime is ignored and the SPIR-V is compiled as without the
//! cache. Unset or empty: no cache.

use crate::ocl::{
    cl_program, Ocl, CL_PROGRAM_BINARIES, CL_PROGRAM_BINARY_SIZES, CL_PROGRAM_DEVICES,
    CL_PROGRAM_NUM_DEVICES, CL_SUCCESS,
};
use sha2::{Digest, Sha256};
use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};

/// The variable naming the cache folder.
pub const CACHE_ENV: &str = "ZE_EMU_PROGRAM_CACHE";

/// The first bytes of an entry (format version 1).
const MAGIC: &[u8; 8] = b"ZEEMUPC1";

/// The cache folder, when one is set.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The entry name of `il` built with `flags` on this runtime.
pub fn key(o: &Ocl, il: &[u8], flags: &CStr) -> String {
    let mut h = Sha256::new();
    for part in [
        b"ze-emu program cache v1".as_slice(),
        o.description.as_bytes(),
        o.runtime_version.as_bytes(),
        flags.to_bytes(),
        il,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn entry_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.bin"))
}

/// An exclusive lock on `key`'s entry while one process compiles it (`flock` on `<key>.lock`, released when
/// dropped or when the process ends): the others that miss the same entry wait for it and then load what it
/// stored, instead of compiling the same module at the same time. The wait is bounded ([`LOCK_WAIT`]); past it,
/// or when the lock file cannot be made, the caller compiles without the lock (as without the cache).
pub struct CompileLock(#[allow(dead_code)] std::fs::File);

/// The longest a process waits for another one's compilation of the same module.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

impl CompileLock {
    /// The lock on `key` in `dir`, or `None` (see [`CompileLock`]).
    pub fn acquire(dir: &Path, key: &str) -> Option<Self> {
        use rustix::fs::{flock, FlockOperation};
        std::fs::create_dir_all(dir).ok()?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("{key}.lock")))
            .ok()?;
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            match flock(&f, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Some(Self(f)),
                Err(e) if e == rustix::io::Errno::WOULDBLOCK && start.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                }
                Err(_) => return None,
            }
        }
    }
}

/// The binary stored under `key`, if the entry is whole and its checksum matches.
pub fn load(dir: &Path, key: &str) -> Option<Vec<u8>> {
    let data = std::fs::read(entry_path(dir, key)).ok()?;
    let rest = data.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < 32 {
        return None;
    }
    let (sum, bin) = rest.split_at(32);
    (!bin.is_empty() && Sha256::digest(bin).as_slice() == sum).then(|| bin.to_vec())
}

/// Store `bin` under `key`: a temporary file renamed into place. Failures are ignored (the cache is an
/// optimisation; the next build compiles again).
pub fn store(dir: &Path, key: &str, bin: &[u8]) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{key}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut data = Vec::with_capacity(MAGIC.len() + 32 + bin.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&Sha256::digest(bin));
    data.extend_from_slice(bin);
    if std::fs::write(&tmp, &data).is_ok() && std::fs::rename(&tmp, entry_path(dir, key)).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(&tmp);
}

/// The binary of a built program for the context's device (`Ocl::device`; a program made from SPIR-V belongs to
/// every device of the context, the engine's sub-device too), if the runtime gives one.
pub fn binary_of(o: &Ocl, prog: cl_program) -> Option<Vec<u8>> {
    let mut n: u32 = 0;
    // SAFETY: valid program; the value is one cl_uint.
    let r = unsafe {
        (o.get_program_info)(
            prog,
            CL_PROGRAM_NUM_DEVICES,
            std::mem::size_of::<u32>(),
            (&mut n as *mut u32).cast(),
            std::ptr::null_mut(),
        )
    };
    if r != CL_SUCCESS || n == 0 {
        return None;
    }
    let n = n as usize;
    let mut devices = vec![std::ptr::null_mut::<c_void>(); n];
    let mut sizes = vec![0usize; n];
    // SAFETY: valid program; arrays of one entry per program device.
    let r = unsafe {
        (o.get_program_info)(
            prog,
            CL_PROGRAM_DEVICES,
            std::mem::size_of_val(devices.as_slice()),
            devices.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    // SAFETY: as above.
    let r2 = unsafe {
        (o.get_program_info)(
            prog,
            CL_PROGRAM_BINARY_SIZES,
            std::mem::size_of_val(sizes.as_slice()),
            sizes.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    let at = devices.iter().position(|d| *d == o.device)?;
    if r != CL_SUCCESS || r2 != CL_SUCCESS || sizes[at] == 0 {
        return None;
    }
    let mut bins: Vec<Vec<u8>> = sizes.iter().map(|s| vec![0u8; *s]).collect();
    let mut ptrs: Vec<*mut u8> = bins.iter_mut().map(|b| b.as_mut_ptr()).collect();
    // SAFETY: one pointer per program device, each to a buffer of that device's reported size.
    let r = unsafe {
        (o.get_program_info)(
            prog,
            CL_PROGRAM_BINARIES,
            std::mem::size_of_val(ptrs.as_slice()),
            ptrs.as_mut_ptr().cast::<c_void>(),
            std::ptr::null_mut(),
        )
    };
    (r == CL_SUCCESS).then(|| bins.swap_remove(at))
}

/// A program created from `bin` and built with `flags`, or `None` (released) when the runtime refuses either.
pub fn program_from(o: &Ocl, bin: &[u8], flags: &CStr) -> Option<cl_program> {
    let (mut status, mut err) = (0, 0);
    let ptr = bin.as_ptr();
    // SAFETY: valid context and device; one binary of the given length; status and error outputs.
    let prog = unsafe {
        (o.create_program_with_binary)(
            o.context,
            1,
            &o.device,
            &bin.len(),
            &ptr,
            &mut status,
            &mut err,
        )
    };
    if err != CL_SUCCESS || status != CL_SUCCESS || prog.is_null() {
        if !prog.is_null() {
            // SAFETY: created above, released once.
            unsafe { (o.release_program)(prog) };
        }
        return None;
    }
    // SAFETY: valid program and device; NUL-terminated options; no callback.
    let r = unsafe {
        (o.build_program)(
            prog,
            1,
            &o.device,
            flags.as_ptr(),
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    if r != CL_SUCCESS {
        // SAFETY: created above, released once.
        unsafe { (o.release_program)(prog) };
        return None;
    }
    Some(prog)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second acquirer of the same key waits until the first lock is dropped; another key does not.
    #[test]
    fn a_compile_lock_holds_back_the_same_key_only() {
        let dir =
            std::env::temp_dir().join(format!("ze-emu-progcache-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = CompileLock::acquire(&dir, "k").expect("lock");
        let other = CompileLock::acquire(&dir, "other").expect("another key is not held back");
        drop(other);
        let (d2, start) = (dir.clone(), std::time::Instant::now());
        let waiter = std::thread::spawn(move || {
            let l = CompileLock::acquire(&d2, "k");
            (l.is_some(), start.elapsed())
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let released = start.elapsed();
        drop(first);
        let (got, at) = waiter.join().expect("waiter");
        assert!(got, "the waiter got the lock");
        assert!(
            at >= released,
            "the waiter got it at {at:?}, before the release at {released:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn entries_round_trip_and_corrupt_ones_are_ignored() {
        let dir = std::env::temp_dir().join(format!("ze-emu-progcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(load(&dir, "k"), None, "no entry");
        store(&dir, "k", b"program binary");
        assert_eq!(
            load(&dir, "k").as_deref(),
            Some(b"program binary".as_slice())
        );
        // A flipped byte, a cut entry, another format: all ignored.
        let path = entry_path(&dir, "k");
        let mut data = std::fs::read(&path).unwrap();
        let last = data.len() - 1;
        data[last] ^= 1;
        std::fs::write(&path, &data).unwrap();
        assert_eq!(load(&dir, "k"), None, "corrupt binary");
        std::fs::write(&path, &data[..20]).unwrap();
        assert_eq!(load(&dir, "k"), None, "cut short");
        std::fs::write(&path, b"ZEEMUPC0").unwrap();
        assert_eq!(load(&dir, "k"), None, "other format");
        // No temporary file is left behind.
        store(&dir, "k", b"again");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("k.bin")]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
