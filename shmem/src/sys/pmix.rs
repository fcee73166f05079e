//! The PMIx client behind safe calls: `pmix-sys`'s shim (PMIx's structures hidden behind plain C types, libpmix
//! loaded at run time). Used by the PMIx bootstrap (`bootstrap/pmix.rs`); built when `pmix-sys` found PMIx's
//! headers (cfg `xpushmem_pmix`).

use crate::error::{Error, Result};
use crate::wait::Backoff;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

/// The longest pause between two looks at a PMIx call's thread (the back-off doubles up to it).
const POLL_MAX: Duration = Duration::from_millis(20);

/// This process's PMIx client: its namespace and rank, after `PMIx_Init`.
#[derive(Debug)]
pub(crate) struct Pmix {
    nspace: CString,
    rank: u32,
    /// The limit of every wait ([`Pmix::init`]'s `limit`).
    limit: Option<Duration>,
    /// The process that started this PE (its parent at `PMIx_Init`), which holds the PMIx server.
    parent: Option<rustix::process::Pid>,
}

fn fail(call: &str, rc: c_int) -> Error {
    // SAFETY: xpmix_error_string never returns null and its text is static (libpmix's table or the shim's).
    let text = unsafe { CStr::from_ptr(pmix_sys::xpmix_error_string(rc)) }.to_string_lossy();
    let hint = match rc {
        -24 => " (PMIX_ERR_TIMEOUT: a process did not arrive within XPUSHMEM_TIMEOUT_MS)",
        -61 | -25 => " (the PMIx server is gone: the launcher or a node daemon died)",
        _ => "",
    };
    Error::Bootstrap {
        method: "pmix",
        message: format!("{call} failed: {text} ({rc}){hint}"),
    }
}

fn check(call: &str, rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(fail(call, rc))
    }
}

fn key(k: &str) -> Result<CString> {
    CString::new(k).map_err(|_| Error::invalid("key", k, "a PMIx key has no NUL byte"))
}

/// A limit in whole seconds for PMIx (0: none), rounded up.
pub(crate) fn seconds(limit: Option<Duration>) -> c_int {
    limit.map_or(0, |d| {
        c_int::try_from(d.as_millis().div_ceil(1000).max(1)).unwrap_or(c_int::MAX)
    })
}

/// Run the blocking PMIx call `call` (named `name`; its thread `xpushmem-pmix-<thread>`) on a thread of its own
/// while this one waits with the runtime's back-off: the call's answer, or an error at `limit` (the timeout, with
/// `detail`), or at once when this process's parent is no longer `parent` (the launcher or node daemon that started
/// this PE, and holds the PMIx server, has ended). A call left waiting stays blocked on its thread; the process can
/// still report the error and exit.
fn bounded<T: Send + 'static>(
    name: &'static str,
    thread: &str,
    limit: Option<Duration>,
    parent: Option<rustix::process::Pid>,
    detail: &str,
    call: impl FnOnce() -> std::result::Result<T, c_int> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("xpushmem-pmix-{thread}"))
        .spawn(move || {
            // The waiting side may have given up and gone: nobody to tell then.
            let _ = tx.send(call());
        })
        .map_err(|e| Error::Os {
            call: "pthread_create (a PMIx call's thread)",
            message: format!("{name}: {e}"),
        })?;
    let mut backoff = Backoff::new(0, 0, POLL_MAX, limit);
    loop {
        match rx.try_recv() {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(rc)) => return Err(fail(name, rc)),
            Err(TryRecvError::Disconnected) => {
                return Err(Error::Bootstrap {
                    method: "pmix",
                    message: format!("{name}'s thread ended without an answer"),
                })
            }
            Err(TryRecvError::Empty) => {}
        }
        if !backoff.pause(|| false) {
            continue;
        }
        if rustix::process::getppid() != parent {
            return Err(Error::Bootstrap {
                method: "pmix",
                message: format!(
                    "{name}: the process that started this PE ({}) ended while {name} waited for the PMIx \
                     server, which it holds (the launcher or a node daemon died)",
                    parent.map_or("unknown".into(), |p| format!("PID {}", p.as_raw_nonzero()))
                ),
            });
        }
        if let Some(waited) = backoff.expired() {
            return Err(Error::Timeout {
                op: format!("{name} (the pmix bootstrap)"),
                waited,
                limit: limit.unwrap_or_default(),
                detail: detail.into(),
            });
        }
    }
}

impl Pmix {
    /// Load libpmix and connect to the PMIx server this process was started under (`PMIx_Init`), waiting at most
    /// `limit` (`None`: no limit).
    ///
    /// `PMIx_Init` takes no time limit, and libpmix 4.2 can wait in it forever: for a server that accepts the
    /// connection and never answers, or one that dies between its answers (a condition wait that the lost
    /// connection never wakes). So it runs on a thread of its own while this one waits with the runtime's
    /// back-off, and gives up at the limit, or at once when the process that started this PE (the launcher or
    /// node daemon that holds the PMIx server: mpirun, orted, prted, slurmstepd) has ended. A thread left waiting
    /// in `PMIx_Init` stays blocked; the process can still report the error and exit.
    pub(crate) fn init(limit: Option<Duration>) -> Result<Pmix> {
        pmix_sys::load().map_err(|message| Error::Bootstrap {
            method: "pmix",
            message,
        })?;
        let parent = rustix::process::getppid();
        let (nspace, rank) = bounded(
            "PMIx_Init",
            "init",
            limit,
            parent,
            "; the PMIx server accepted the connection and never answered",
            || {
                let mut ns = [0 as c_char; pmix_sys::XPMIX_NSLEN as usize];
                let mut rank = 0u32;
                // SAFETY: the shim writes at most XPMIX_NSLEN bytes (NUL-terminated) into `ns` and one u32 into
                // `rank`, both owned by this thread for the whole call; libpmix is loaded (above).
                let rc = unsafe { pmix_sys::xpmix_init(ns.as_mut_ptr(), &mut rank) };
                (rc == 0)
                    .then(|| {
                        // SAFETY: xpmix_init NUL-terminated the buffer.
                        (unsafe { CStr::from_ptr(ns.as_ptr()) }.to_owned(), rank)
                    })
                    .ok_or(rc)
            },
        )?;
        Ok(Pmix {
            nspace,
            rank,
            limit,
            parent,
        })
    }

    /// This process's rank in its namespace.
    pub(crate) fn rank(&self) -> u32 {
        self.rank
    }

    /// An unsigned integer attribute of `rank` (`pmix_sys::RANK_WILDCARD`: of the job).
    pub(crate) fn get_uint(&self, rank: u32, k: &str, timeout_s: c_int) -> Result<u64> {
        let ck = key(k)?;
        let mut v = 0u64;
        // SAFETY: NUL-terminated strings that outlive the call; the shim writes one u64.
        let rc = unsafe {
            pmix_sys::xpmix_get_uint(self.nspace.as_ptr(), rank, ck.as_ptr(), timeout_s, &mut v)
        };
        check(&format!("PMIx_Get({k})"), rc).map(|()| v)
    }

    /// A string attribute of `rank`.
    pub(crate) fn get_string(&self, rank: u32, k: &str, timeout_s: c_int) -> Result<String> {
        let ck = key(k)?;
        let mut p: *mut c_char = std::ptr::null_mut();
        // SAFETY: as for get_uint; on success the shim stores a malloc'd NUL-terminated copy in `p`.
        let rc = unsafe {
            pmix_sys::xpmix_get_string(self.nspace.as_ptr(), rank, ck.as_ptr(), timeout_s, &mut p)
        };
        check(&format!("PMIx_Get({k})"), rc)?;
        // SAFETY: `p` is the shim's NUL-terminated copy, read once and freed with the shim's free.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: `p` came from the shim's malloc and is not used after this.
        unsafe { pmix_sys::xpmix_free(p.cast()) };
        Ok(s)
    }

    /// Publish `data` under `k` for every process of the job (`PMIx_Put`, global scope; seen after commit+fence).
    pub(crate) fn put(&self, k: &str, data: &[u8]) -> Result<()> {
        let ck = key(k)?;
        // SAFETY: PMIx_Put copies `data.len()` bytes from `data` during the call.
        let rc =
            unsafe { pmix_sys::xpmix_put_bytes(ck.as_ptr(), data.as_ptr().cast(), data.len()) };
        check(&format!("PMIx_Put({k})"), rc)
    }

    /// `PMIx_Commit`.
    pub(crate) fn commit(&self) -> Result<()> {
        // SAFETY: no arguments; libpmix is loaded and initialised.
        check("PMIx_Commit", unsafe { pmix_sys::xpmix_commit() })
    }

    /// `PMIx_Fence` over the whole namespace, collecting the committed data (the only fence the bootstrap uses: see
    /// `bootstrap/pmix.rs` on the fence without data collection), waiting at most the limit given to
    /// [`Pmix::init`]. The fence passes that limit on as `PMIX_TIMEOUT`, but a server need not honour it (Slurm
    /// 22.05's `mpi/pmix_v4` does not: its own limit is 300 s), so it runs on a thread of its own like `PMIx_Init`
    /// and this one gives up at the limit, or at once when the process that started this PE has ended.
    pub(crate) fn fence(&self) -> Result<()> {
        // The server's limit a second later than this PE's, so that the error is the same under every server.
        let timeout_s = match seconds(self.limit) {
            0 => 0,
            s => s.saturating_add(1),
        };
        bounded(
            "PMIx_Fence",
            "fence",
            self.limit,
            self.parent,
            "; a process of the job did not arrive",
            move || {
                // SAFETY: plain integers; libpmix is loaded and initialised.
                match unsafe { pmix_sys::xpmix_fence(1, timeout_s) } {
                    0 => Ok(()),
                    rc => Err(rc),
                }
            },
        )
    }

    /// The bytes `rank` published under `k`.
    pub(crate) fn get_bytes(&self, rank: u32, k: &str, timeout_s: c_int) -> Result<Vec<u8>> {
        let ck = key(k)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: as for get_uint; on success the shim stores a malloc'd copy of `len` bytes in `p`.
        let rc = unsafe {
            pmix_sys::xpmix_get_bytes(
                self.nspace.as_ptr(),
                rank,
                ck.as_ptr(),
                timeout_s,
                &mut p,
                &mut len,
            )
        };
        check(&format!("PMIx_Get({k}) of rank {rank}"), rc)?;
        // SAFETY: `p` holds `len` bytes (the shim's copy), read once before it is freed.
        let v = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec();
        // SAFETY: `p` came from the shim's malloc and is not used after this.
        unsafe { pmix_sys::xpmix_free(p) };
        Ok(v)
    }

    /// `PMIx_Finalize`.
    pub(crate) fn finalize(&self) -> Result<()> {
        // SAFETY: no arguments; libpmix is loaded and initialised.
        check("PMIx_Finalize", unsafe { pmix_sys::xpmix_finalize() })
    }
}
