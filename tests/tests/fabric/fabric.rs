//! The fabric transport (libfabric `tcp` over loopback) in jobs that mix it with shared memory: PEs are split into
//! nodes with `XPUSHMEM_NODE_ID` (same node: shm; other node: fabric) or forced onto the fabric
//! (`XPUSHMEM_TRANSPORT=fabric`). One body checks the routes, then RMA, atomics, put-with-signal, barriers, the
//! team collectives, a strided team split and the MoE `all_to_all_vdev`, each against a reference every PE
//! computes on its own. The same body runs across network namespaces in `fabric_netns.rs`.
//!
//! Skipped (with a message) when the build has no fabric transport (libfabric headers missing at build time).

use crate::fabric_common::{fabric_available, mixed_body, node_of};
use xpushmem_tests::{assert_success, is_pe_of, run_pe, spawn_pes_with, test_name};

/// Run `name` at `n` PEs on `nodes` nodes (`0`: every peer forced onto the fabric).
fn mixed(name: &str, n: usize, nodes: usize) {
    if is_pe_of(name) {
        if nodes > 0 {
            let rank = xpushmem_tests::launcher_rank();
            // Before init, in this single-threaded PE process: its node.
            std::env::set_var(
                "XPUSHMEM_NODE_ID",
                format!("node{}", node_of(rank, n, nodes)),
            );
        }
        run_pe(|sh| mixed_body(sh, nodes));
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let env: &[(&str, &str)] = if nodes == 0 {
        &[("XPUSHMEM_TRANSPORT", "fabric")]
    } else {
        &[]
    };
    let out = spawn_pes_with(name, n, env);
    assert_success(name, n, &out);
}

macro_rules! mixed_test {
    ($name:ident, $n:expr, $nodes:expr) => {
        #[test]
        fn $name() {
            mixed(&test_name(module_path!(), stringify!($name)), $n, $nodes);
        }
    };
}

mixed_test!(forced_fabric_2pe, 2, 0);
mixed_test!(forced_fabric_3pe, 3, 0);
mixed_test!(two_nodes_3pe, 3, 2);
mixed_test!(two_nodes_4pe, 4, 2);
mixed_test!(four_nodes_4pe, 4, 4);

/// PE 2 (alone on the second node, reached through the fabric) is killed while the others are in a barrier and a
/// reduction: they must fail with `PeerLost` naming it well within the wait limit, and no process may be left.
#[test]
fn peer_death_across_nodes_is_peer_lost_3pe() {
    use std::time::Duration;
    use xpushmem::Error;
    let name = test_name(module_path!(), "peer_death_across_nodes_is_peer_lost_3pe");
    let (n, nodes) = (3, 2);
    if is_pe_of(&name) {
        let rank = xpushmem_tests::launcher_rank();
        std::env::set_var(
            "XPUSHMEM_NODE_ID",
            format!("node{}", node_of(rank, n, nodes)),
        );
        run_pe(|sh| {
            assert_eq!(
                sh.transport_name(2),
                if sh.my_pe() == 2 { "local" } else { "fabric" }
            );
            let v = sh.calloc::<i64>(4)?;
            let gone = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            // PE 2 dies only once the others are out of the barrier (a dead PE's memory is gone, unlike a
            // mapping's): each tells it so.
            if sh.my_pe() == 2 {
                sh.wait_until(gone, xpushmem::Cmp::Ge, 2)?;
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            sh.atomic_add(gone, 1, 2)?;
            let start = std::time::Instant::now();
            let r = if sh.my_pe() == 0 {
                sh.barrier_all()
            } else {
                sh.sum_reduce(&sh.team_world(), v, v, 4)
            };
            match r {
                Err(Error::PeerLost { pe: 2, .. }) => {
                    println!(
                        "verdict PE {}: PeerLost after {:?} OK",
                        sh.my_pe(),
                        start.elapsed()
                    );
                    Ok(())
                }
                r => panic!("expected PE 2 lost, got {r:?}"),
            }
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut job = xpushmem_tests::pe_job(&name, n, &[("XPUSHMEM_TIMEOUT_MS", "30000")]);
    job.timeout = Some(Duration::from_secs(90));
    job.stop_on_failure = false;
    let out = job.run().expect("launch");
    crate::fabric_common::assert_peer_lost(&name, &out, 2);
    let left = xpushmem_tests::processes_of(&name);
    assert!(left.is_empty(), "processes of the job left: {left:?}");
}

/// Every PE adds to every PE's words, its own through CPU atomics and the others through the fabric, while the
/// owner may apply the remote ones on another thread (progress thread): no update may be lost, so the provider's
/// atomics must be atomic with respect to the CPU's. Also with every atomic but compare-and-swap emulated.
fn concurrent_atomics(name: &str, n: usize, env: &[(&str, &str)]) {
    const K: u64 = 400;
    if is_pe_of(name) {
        run_pe(|sh| {
            let (me, n) = (sh.my_pe(), sh.n_pes());
            let w64 = sh.calloc::<u64>(1)?.at(0)?;
            let w32 = sh.calloc::<u32>(1)?.at(0)?;
            sh.barrier_all()?;
            let mut seen = 0u32;
            for _ in 0..K {
                for pe in (0..n).map(|k| (me + k) % n) {
                    sh.atomic_add(w64, 1, pe)?;
                    seen = seen.max(sh.atomic_fetch_add(w32, 3u32, pe)?);
                }
            }
            sh.barrier_all()?;
            assert_eq!(
                sh.atomic_fetch(w64, me)?,
                K * n as u64,
                "64-bit adds on PE {me}"
            );
            assert_eq!(
                sh.atomic_fetch(w32, me)?,
                3 * (K * n as u64) as u32,
                "32-bit fetch-adds on PE {me}"
            );
            assert!(
                seen < 3 * (K * n as u64) as u32 && seen % 3 == 0,
                "fetched {seen}"
            );
            sh.barrier_all()
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut all = vec![("XPUSHMEM_TRANSPORT", "fabric")];
    all.extend_from_slice(env);
    let out = spawn_pes_with(name, n, &all);
    assert_success(name, n, &out);
}

#[test]
fn concurrent_atomics_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_3pe");
    concurrent_atomics(&name, 3, &[]);
}

#[test]
fn concurrent_atomics_progress_thread_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_progress_thread_3pe");
    concurrent_atomics(&name, 3, &[("XPUSHMEM_PROGRESS_THREAD", "1")]);
}

#[test]
fn concurrent_atomics_cas_emulation_3pe() {
    let name = test_name(module_path!(), "concurrent_atomics_cas_emulation_3pe");
    concurrent_atomics(
        &name,
        3,
        &[
            ("XPUSHMEM_PROGRESS_THREAD", "1"),
            ("XPUSHMEM_FABRIC_ATOMICS", "cas"),
        ],
    );
}

/// A blocking put of 64 MiB from private memory (written by the provider in place, over the fabric) while PE 1
/// serves nothing: PE 1 sleeps outside the library (no progress thread), so the write stalls once the sockets'
/// buffers are full. PE 0 (`XPUSHMEM_TIMEOUT_MS` 4 s) must get a `Timeout` naming the put; the provider may still
/// hold the caller's buffer then, so the transport must have closed its endpoint: PE 0 overwrites the buffer
/// (0xFF, a byte the payload never has) and frees it, its later fabric operations fail naming the closed
/// endpoint, and once PE 1 wakes and serves again no byte of the overwritten buffer may reach it (every byte of
/// its target is still 0 or the payload's). PE 1 then finds PE 0 gone from the fabric (an error, no hang). The
/// PEs pace each other through files (outside the library, which PE 0 can no longer use).
#[test]
fn zero_copy_put_timeout_closes_endpoint_2pe() {
    use std::path::PathBuf;
    use std::time::{Duration, Instant};
    use xpushmem::Error;
    const LEN: usize = 64 << 20;
    let name = test_name(module_path!(), "zero_copy_put_timeout_closes_endpoint_2pe");
    let payload = |i: usize| (i % 251) as u8;
    if is_pe_of(&name) {
        let rank = xpushmem_tests::launcher_rank();
        // Before init, in this single-threaded PE process: PE 0 gives up on the stalled put after 4 s (short, yet
        // long enough for its barriers on a loaded machine); PE 1 waits longer, so that it keeps serving while PE 0
        // could still (wrongly) be sending.
        std::env::set_var(
            "XPUSHMEM_TIMEOUT_MS",
            if rank == 0 { "4000" } else { "6000" },
        );
        let uid = std::env::var("XPUSHMEM_BOOTSTRAP_UID").expect("uid set by the launcher");
        let tag: String = uid
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = PathBuf::from(format!("/tmp/xpushmem-zc-{tag}"));
        std::fs::create_dir_all(&dir).expect("flag directory");
        let flag = |f: &str| dir.join(f);
        let raise = |f: &str| std::fs::write(flag(f), b"1").expect("flag");
        let wait_flag = |f: &str| {
            let start = Instant::now();
            while !flag(f).exists() {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "flag {f} never came"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        run_pe(|sh| {
            assert_eq!(sh.transport_name(1 - sh.my_pe()), "fabric");
            let dst = sh.calloc::<u8>(LEN)?;
            let word = sh.calloc::<u64>(1)?.at(0)?;
            // Where PE 0's later puts go (not `dst`, whose every byte is checked against the failed put).
            let other = sh.calloc::<u8>(1 << 20)?;
            sh.barrier_all()?;
            // One poll of the transports (a wait on a condition that holds: it polls once, then returns).
            let poll = || sh.wait_until(word, xpushmem::Cmp::Ge, 0);
            if sh.my_pe() == 1 {
                // Serve until PE 0 is ready to put, then sleep without calling in.
                while !flag("ready").exists() {
                    poll()?;
                }
                raise("asleep");
                wait_flag("wake");
                // Serve again for a while: a put still reading PE 0's (overwritten) buffer would land now.
                let start = Instant::now();
                let mut first_err = None;
                while start.elapsed() < Duration::from_secs(3) && first_err.is_none() {
                    first_err = poll().err();
                }
                println!("PE 1 serving again ended with {first_err:?}");
                let mut got = vec![0u8; LEN];
                sh.get(&mut got, dst, 1)?;
                let landed = (0..LEN)
                    .filter(|&i| got[i] == payload(i) && got[i] != 0)
                    .count();
                if let Some(i) = (0..LEN).find(|&i| got[i] != 0 && got[i] != payload(i)) {
                    panic!(
                        "byte {i} of the target is {:#x}: neither 0 nor the payload's {:#x} (bytes of the buffer \
                         PE 0 overwrote after its put failed reached this PE)",
                        got[i],
                        payload(i)
                    );
                }
                println!("verdict PE 1: {landed} nonzero payload bytes landed, none from the overwritten buffer");
                raise("checked");
                // PE 0 cut itself off the fabric: an operation on it fails (once this PE's own limit passes: the
                // provider keeps trying to reconnect), no hang. Finalize would wait that long again for PE 0 (it
                // left without the fabric's finalize barrier): this PE leaves here.
                let r = sh.barrier_all();
                println!("verdict PE 1: barrier with PE 0 off the fabric: {r:?}");
                assert!(r.is_err(), "a barrier with PE 0 off the fabric succeeded");
                std::process::exit(0);
            }
            let mut src: Vec<u8> = (0..LEN).map(payload).collect();
            sh.quiet()?;
            raise("ready");
            while !flag("asleep").exists() {
                poll()?;
            }
            let start = Instant::now();
            let r = sh.put(dst, &src, 1);
            println!("PE 0: the put returned after {:?}: {r:?}", start.elapsed());
            match &r {
                Err(Error::Timeout { op, detail, .. }) => {
                    assert!(op.contains("put"), "the timeout names {op:?}, not the put");
                    assert!(
                        detail.contains("closed"),
                        "the timeout says nothing of the closed endpoint: {detail}"
                    );
                }
                r => panic!("expected a Timeout of the put, got {r:?}"),
            }
            // The caller owns its buffer again: overwrite it, then free it.
            src.iter_mut().for_each(|b| *b = 0xFF);
            raise("wake");
            let later = [
                ("quiet", sh.quiet()),
                ("put", sh.put(other.slice(..8)?, &[1u8; 8], 1)),
                ("put of 1 MiB", sh.put(other, &src[..1 << 20], 1)),
                ("barrier", sh.barrier_all()),
            ];
            drop(src);
            // Keep calling in (a transport that still sent the old put would send now) until PE 1 has checked.
            let start = Instant::now();
            while !flag("checked").exists() && start.elapsed() < Duration::from_secs(60) {
                let _ = sh.quiet();
                std::thread::sleep(Duration::from_millis(1));
            }
            for (what, r) in later {
                println!("PE 0: {what} after the failed put: {r:?}");
                match r {
                    Err(e) => assert!(
                        e.to_string().contains("endpoint") && e.to_string().contains("closed"),
                        "{what}: {e} does not name the closed endpoint"
                    ),
                    Ok(()) => {
                        panic!("{what} succeeded over a fabric endpoint that should be closed")
                    }
                }
            }
            println!("verdict PE 0: Timeout, then every fabric operation failed naming the closed endpoint");
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let mut job = xpushmem_tests::pe_job(&name, 2, &[("XPUSHMEM_TRANSPORT", "fabric")]);
    job.timeout = Some(Duration::from_secs(120));
    job.stop_on_failure = false;
    let out = job.run().expect("launch");
    assert_success(&name, 2, &out);
    let text = xpushmem_tests::outputs(&out);
    assert!(
        text.contains("verdict PE 0") && text.contains("verdict PE 1"),
        "{text}"
    );
}

/// The small-message path of the fabric (`net/ofi`): PE 0 issues, in the default domain and two domains of its
/// own, injected puts (8 B, up to the provider's inject size) interleaved with puts that take a context (128 B,
/// 4 KiB, 40 KiB through a bounce buffer) and non-fetching atomics, which the same write counter counts; each
/// domain's quiet must end (the counter's accounting settles) and leave its values at PE 1, checked there against
/// the values PE 0 computed. Then a put_signal ping-pong over every path (injected sizes, copied sizes, a
/// bounce buffer) in which each side checks the whole payload when it sees the signal: with a provider that
/// orders writes (`FI_ORDER_WAW`) the signal goes right behind its data, and a signal seen before its data fails
/// the check.
///
/// The reader spins on the signal with `test`, which drives one step of the transports' progress as a wait's poll
/// does: `tcp;ofi_rxm` moves data only while the target calls in, so without that step the loop never ends.
///
/// `by_message`: over a provider with manual progress that does not order a signal behind its data
/// (`tcp;ofi_rxm`), each PE's put_signals up to 4 KiB go as one message the target applies, data then signal (a
/// PE sends in every round: 4 sizes x 10), and the larger ones (12,000 and 200,000 bytes, copied or written in
/// place) as writes that tell the target of their landing, then the signal as a message the target applies once
/// they landed; both counted in its copy statistics.
fn small_messages(name: &str, env: &[(&str, &str)], by_message: bool) {
    use xpushmem::{Cmp, SignalOp};
    if is_pe_of(name) {
        run_pe(|sh| {
            let (me, other) = (sh.my_pe(), 1 - sh.my_pe());
            const N: usize = 96;
            // Three rows of N words (default domain, d1, d2), the context-path puts' bytes, an atomic counter.
            let rows = sh.calloc::<u64>(3 * N)?;
            let bytes = sh.calloc::<u8>(3 * 40_000)?;
            let adds = sh.calloc::<u64>(1)?.at(0)?;
            let value = |row: usize, i: usize| (row as u64 + 1) * 1_000_003 + i as u64 * 7;
            let pattern = |k: usize, len: usize| -> Vec<u8> {
                (0..len).map(|j| (j * 31 + k * 7 + 1) as u8).collect()
            };
            sh.barrier_all()?;
            if me == 0 {
                let d1 = sh.domain_open()?;
                let d2 = sh.domain_open()?;
                let row2: Vec<u64> = (0..N).map(|i| value(2, i)).collect();
                let mut held = Vec::new();
                for i in 0..N {
                    sh.p(rows.at(i)?, value(0, i), other)?;
                    sh.on(d1)?.p(rows.at(N + i)?, value(1, i), other)?;
                    let w = sh.on(d2)?.put_nbi(
                        rows.slice(2 * N + i..2 * N + i + 1)?,
                        &row2[i..i + 1],
                        other,
                    )?;
                    if i % 3 == 0 {
                        // Completing one injected put's handle waits for its delivery.
                        w.wait()?;
                    } else {
                        // The others are completed by d2's quiet (their handles, dropped after it, find them so).
                        held.push(w);
                    }
                    if i % 16 == 0 {
                        let k = i / 16;
                        let len = [128, 4096, 40_000][k % 3];
                        let at = (k % 3) * 40_000;
                        sh.on(d1)?
                            .put(bytes.slice(at..at + len)?, &pattern(k, len), other)?;
                        sh.on(d2)?.atomic_add(adds, 1, other)?;
                    }
                }
                sh.on(d2)?.quiet()?;
                assert!(
                    held.iter().all(|w| w.test()),
                    "d2's puts complete after its quiet"
                );
                drop(held);
                sh.on(d1)?.quiet()?;
                sh.domain_close(d1)?;
                sh.domain_close(d2)?;
            }
            // The barrier completes the default domain's puts; the others were completed by their quiets.
            sh.barrier_all()?;
            if me == 1 {
                let mut got = vec![0u64; 3 * N];
                sh.get(&mut got, rows.slice(0..3 * N)?, me)?;
                let want: Vec<u64> = (0..3 * N).map(|j| value(j / N, j % N)).collect();
                assert_eq!(got, want, "small puts of three domains");
                assert_eq!(sh.g(adds, me)?, N.div_ceil(16) as u64, "atomic adds");
                let last =
                    |slot: usize| (0..N).step_by(16).map(|i| i / 16).rfind(|k| k % 3 == slot);
                for slot in 0..3 {
                    if let Some(k) = last(slot) {
                        let len = [128, 4096, 40_000][slot];
                        let mut b = vec![0u8; len];
                        sh.get(&mut b, bytes.slice(slot * 40_000..slot * 40_000 + len)?, me)?;
                        assert!(b == pattern(k, len), "the {len}-byte put of round {k}");
                    }
                }
            }
            sh.barrier_all()?;
            // put_signal ping-pong: PE 0 sends round r (odd signal values), PE 1 checks and answers (even ones).
            let data = sh.calloc::<u8>(PP_MAX)?;
            let sig = sh.calloc::<u64>(1)?.at(0)?;
            sh.barrier_all()?;
            let mut round = 0u64;
            let before = sh.copy_stats();
            for &len in &PP_SIZES {
                for _ in 0..PP_ROUNDS {
                    round += 1;
                    let turn = |r: u64| 2 * r - u64::from(me == 0);
                    if me == 1 || round > 1 {
                        // Wait for the other side's message of this round (PE 1) or of the last one (PE 0).
                        let r = if me == 1 { round } else { round - 1 };
                        let want = 2 * r - u64::from(me == 1);
                        // A tight loop of tests, so that the payload is read as soon as the signal shows (a wait
                        // that backs off gives late data time to land).
                        let since = std::time::Instant::now();
                        while !sh.test(sig, Cmp::Ge, want)? {
                            assert!(
                                since.elapsed() < std::time::Duration::from_secs(60),
                                "PE {me}: no signal of round {r} in 60 s"
                            );
                        }
                        assert_eq!(sh.signal_fetch(sig)?, want, "signal of round {r}");
                        let prev = if me == 1 { len } else { last_len(round - 1) };
                        let mut b = vec![0u8; prev];
                        sh.get(&mut b, data.slice(0..prev)?, me)?;
                        assert!(
                            b == pattern(r as usize + me, prev),
                            "PE {me}: {prev} bytes of round {r} seen with their signal"
                        );
                    }
                    // Both forms in turn: from ZERO_COPY_MIN the blocking one writes its data in place when the
                    // signal waits for it anyway (`tcp;ofi_rxm`), the non-blocking one through a bounce buffer.
                    let payload = pattern(round as usize + other, len);
                    let (dst, value) = (data.slice(0..len)?, turn(round));
                    if round % 2 == 0 {
                        sh.put_signal_nbi(dst, &payload, sig, value, SignalOp::Set, other)?
                            .wait()?;
                    } else {
                        sh.put_signal(dst, &payload, sig, value, SignalOp::Set, other)?;
                    }
                }
            }
            let after = sh.copy_stats();
            if by_message {
                let small = PP_SIZES.iter().filter(|&&l| l <= 8 * 1024).count();
                assert_eq!(
                    after.put_signals_as_messages - before.put_signals_as_messages,
                    (small * PP_ROUNDS) as u64,
                    "PE {me}: put_signals sent as messages"
                );
                assert_eq!(
                    after.put_signals_after_writes - before.put_signals_after_writes,
                    ((PP_SIZES.len() - small) * PP_ROUNDS) as u64,
                    "PE {me}: put_signals after told writes"
                );
            }
            if me == 0 {
                let want = 2 * round;
                assert_eq!(sh.signal_wait_until(sig, Cmp::Ge, want)?, want);
                let mut b = vec![0u8; PP_MAX];
                sh.get(&mut b, data.slice(0..PP_MAX)?, me)?;
                assert!(b == pattern(round as usize, PP_MAX), "the last answer");
            }
            sh.barrier_all()?;
            Ok(())
        });
    }
    if !fabric_available() {
        eprintln!(
            "skipped: this build has no fabric transport (libfabric headers missing at build time)"
        );
        return;
    }
    let out = spawn_pes_with(name, 2, env);
    assert_success(name, 2, &out);
}

/// The payload sizes of [`small_messages`]'s ping-pong: injected sizes, copied ones, and a bounce buffer's just
/// below the size from which every put_signal waits for its data (`SIGNAL_DIRECT_MIN`, 256 KiB; the blocking
/// one from 32 KiB where the provider does not order the signal behind the data), whose long transfer leaves a
/// signal sent ahead of it time to be seen first.
const PP_SIZES: [usize; 6] = [8, 64, 200, 4096, 12_000, PP_MAX];
const PP_MAX: usize = 200_000;
/// Ping-pong rounds per size: a signal that overtakes its data is seen only when the reader looks in between, so
/// one round would rarely catch it.
const PP_ROUNDS: usize = 10;

/// The payload size of ping-pong round `r` (1-based) of [`small_messages`].
fn last_len(r: u64) -> usize {
    PP_SIZES[((r - 1) / PP_ROUNDS as u64) as usize]
}

#[test]
fn small_messages_2pe() {
    small_messages(
        &test_name(module_path!(), "small_messages_2pe"),
        &[("XPUSHMEM_TRANSPORT", "fabric")],
        true,
    );
}

/// The same over libfabric's `sockets` provider, which orders writes and atomics (`FI_ORDER_WAW`, `tcp;ofi_rxm`
/// does not), so that put_signal's signal goes right behind its data. Skipped when libfabric has no `sockets`.
#[test]
fn small_messages_ordered_provider_2pe() {
    let name = test_name(module_path!(), "small_messages_ordered_provider_2pe");
    if !is_pe_of(&name) && fabric_available() {
        let listed = xpushmem::transport::fabric_providers()
            .ok()
            .flatten()
            .is_some_and(|p| p.iter().any(|(n, _, _)| n == "sockets"));
        if !listed {
            eprintln!("skipped: libfabric offers no sockets provider here");
            return;
        }
    }
    small_messages(
        &name,
        &[
            ("XPUSHMEM_TRANSPORT", "fabric"),
            ("XPUSHMEM_FABRIC_PROVIDER", "sockets"),
        ],
        false,
    );
}
