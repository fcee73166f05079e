//! Registered user buffers (`Shmem::register`, `register_raw`): non-blocking puts from them and gets into them,
//! with their handles forgotten and the buffers changed only after `quiet` (or after the guard completed them),
//! the data checked on the target against `reference()`; over the fabric, the copy counters show that nothing
//! was copied for them while a private source still is; and the bad inputs, each an error naming its argument
//! (device heaps: host buffers registered as sources of puts to the peers' device heaps; device memory refused).

use xpushmem::{Error, Result, Shmem};
use xpushmem_tests::{pe_test, ref_vec};

/// 1 MiB and 24 bytes of u64: larger than the fabric's bounce buffers' smallest size and not a power of two.
const BIG: usize = (1 << 17) + 3;
/// A small put (below every zero-copy threshold of the blocking forms).
const SMALL: usize = 5;

fn invalid_arg(e: Error, name: &str, needle: &str) {
    match &e {
        Error::InvalidArgument {
            name: n, reason, ..
        } => {
            assert_eq!(*n, name, "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
            let _ = reason;
        }
        other => panic!("expected InvalidArgument({name}), got {other}"),
    }
}

fn body(sh: &Shmem) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let fabric = sh.transport_name(right) == "fabric";
    let dst = sh.calloc::<u64>(BIG + SMALL)?;
    let (big, small) = (dst.slice(0..BIG)?, dst.slice(BIG..BIG + SMALL)?);

    // 1. Puts from a registered buffer, their handles forgotten (the registry still completes them), the buffer
    //    changed only after quiet.
    let mut reg = sh.register(ref_vec::<u64>(me, BIG + SMALL, 1))?;
    let before = sh.copy_stats();
    {
        let s = reg.as_slice()?;
        std::mem::forget(sh.put_nbi(big, &s[..BIG], right)?);
        std::mem::forget(sh.put_nbi(small, &s[BIG..], right)?);
    }
    sh.quiet()?;
    let after = sh.copy_stats();
    reg.as_mut_slice()?.fill(0xdead_beef);
    if fabric {
        assert_eq!(
            (after.puts_copied, after.put_bytes_copied),
            (before.puts_copied, before.put_bytes_copied),
            "a put from a registered buffer was copied: {before:?} -> {after:?}"
        );
        assert_eq!(after.puts_in_place, before.puts_in_place + 2, "{after:?}");
    } else {
        // Mapped memory (and the deferred test transport) count nothing.
        assert_eq!(after, before);
    }
    sh.barrier_all()?;
    let mut got = vec![0u64; BIG + SMALL];
    sh.get(&mut got, dst, me)?;
    assert_eq!(
        got,
        ref_vec::<u64>(left, BIG + SMALL, 1),
        "PE {me}: what PE {left} put"
    );
    sh.barrier_all()?;

    // 2. The same puts from a private buffer: copied over the fabric (the path every put took before
    //    registration, which the counters would show for the registered buffer above).
    let private = ref_vec::<u64>(me, BIG + SMALL, 2);
    let before = sh.copy_stats();
    sh.put_nbi(big, &private[..BIG], right)?.wait()?;
    sh.put_nbi(small, &private[BIG..], right)?.wait()?;
    let after = sh.copy_stats();
    if fabric {
        assert_eq!(after.puts_copied, before.puts_copied + 2, "{after:?}");
        assert_eq!(
            after.put_bytes_copied,
            before.put_bytes_copied + 8 * (BIG + SMALL) as u64
        );
    }
    sh.barrier_all()?;
    sh.get(&mut got, dst, me)?;
    assert_eq!(got, ref_vec::<u64>(left, BIG + SMALL, 2));
    sh.barrier_all()?;

    // 3. Gets into a registered buffer (in place over the fabric): one waited for, one forgotten and completed by
    //    `as_slice`. The right neighbour's `dst` holds what this PE put (step 2).
    let mut into = sh.register(vec![0u64; BIG + SMALL])?;
    let before = sh.copy_stats();
    {
        let g = into.as_mut_slice()?;
        let (a, b) = g.split_at_mut(BIG);
        sh.get_nbi(a, big, right)?.wait()?;
        std::mem::forget(sh.get_nbi(b, small, right)?);
    }
    assert_eq!(into.as_slice()?, &ref_vec::<u64>(me, BIG + SMALL, 2)[..]);
    let after = sh.copy_stats();
    if fabric {
        assert_eq!(
            (after.gets_copied, after.get_bytes_copied),
            (before.gets_copied, before.get_bytes_copied),
            "a get into a registered buffer was copied: {after:?}"
        );
        assert_eq!(after.gets_in_place, before.gets_in_place + 2, "{after:?}");
    }
    assert_eq!(into.unregister()?, ref_vec::<u64>(me, BIG + SMALL, 2));
    sh.barrier_all()?;

    // 4. A raw registration (C's xpushmemx_buffer_register), unregistered while a put from it may be in flight:
    //    the unregister completes it first.
    let mut raw = ref_vec::<u64>(me, BIG, 3);
    let p = raw.as_mut_ptr().cast::<u8>();
    // SAFETY: `raw` stays alive and unchanged until unregister_raw below.
    unsafe { sh.register_raw(p, 8 * BIG)? };
    let before = sh.copy_stats();
    std::mem::forget(sh.put_nbi(big, &raw, right)?);
    sh.unregister_raw(p)?;
    raw.fill(0);
    if fabric {
        assert_eq!(sh.copy_stats().put_bytes_copied, before.put_bytes_copied);
    }
    sh.barrier_all()?;
    sh.get(&mut got[..BIG], big, me)?;
    assert_eq!(&got[..BIG], &ref_vec::<u64>(left, BIG, 3)[..]);

    // 5. Bad input, each naming its argument and value.
    invalid_arg(
        sh.register(Vec::<u64>::new()).unwrap_err(),
        "buf",
        "0 bytes",
    );
    let mut mem = vec![0u8; 4096];
    let q = mem.as_mut_ptr();
    // SAFETY: `mem` outlives its registration (unregistered below); nothing reads it while a transfer is in flight.
    unsafe {
        invalid_arg(
            sh.register_raw(std::ptr::null_mut(), 8).unwrap_err(),
            "addr",
            "NULL",
        );
        invalid_arg(sh.register_raw(q, 0).unwrap_err(), "len", "0");
        sh.register_raw(q, 4096)?;
        let inner = q.add(100);
        invalid_arg(
            sh.register_raw(inner, 8).unwrap_err(),
            "addr",
            "overlaps the registered range",
        );
        invalid_arg(
            sh.register_raw(q.sub(8), 16).unwrap_err(),
            "addr",
            &format!("{:#x}", q as usize - 8),
        );
        // The heap: registered already (host), device memory (device heaps: not registrable yet).
        let why = match sh.heap_kind() {
            xpushmem::HeapKind::Host => "symmetric heap",
            xpushmem::HeapKind::Device => "Level Zero device memory",
        };
        invalid_arg(sh.register_raw(sh.heap_base(), 8).unwrap_err(), "addr", why);
        invalid_arg(
            sh.register_raw(usize::MAX as *mut u8, 2).unwrap_err(),
            "len",
            "wraps",
        );
    }
    invalid_arg(
        sh.unregister_raw(q.wrapping_add(1)).unwrap_err(),
        "addr",
        &format!("{:#x}", q as usize + 1),
    );
    sh.unregister_raw(q)?;
    invalid_arg(
        sh.unregister_raw(q).unwrap_err(),
        "addr",
        "no registered range starts there",
    );
    let owned = sh.register(vec![1u32; 4])?;
    let op = owned.as_slice()?.as_ptr() as *mut u8;
    invalid_arg(
        sh.unregister_raw(op).unwrap_err(),
        "addr",
        "Registered buffer",
    );
    drop(owned);
    invalid_arg(
        sh.unregister_raw(op).unwrap_err(),
        "addr",
        "no registered range",
    );
    drop(mem);
    sh.barrier_all()?;
    sh.free(dst)
}

pe_test!(registered_buffers, shm[2], def[2], fab[2], dev[2], |sh| {
    super::body(sh)
});
