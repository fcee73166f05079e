//! RMA: put/get for every element type and edge sizes, p/g, non-blocking and strided forms, ptr. Every value is
//! checked against `reference()`, computed independently by the reader.

use xpushmem::{Cmp, Error, Result, Shmem, SignalOp};
use xpushmem_tests::{pe_test, ref_vec, FromRef};

/// Sizes that hit the edges: empty, one element, odd and unaligned counts, a page and a bit.
const SIZES: &[usize] = &[0, 1, 3, 7, 64, 1023, 4097];

/// Each PE puts a reference vector into its right neighbour; each checks what its left neighbour sent, with both a
/// local get and a remote get from the writer's side.
fn ring_put_get<T: FromRef>(sh: &Shmem, salt: u64) -> Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    for (k, &len) in SIZES.iter().enumerate() {
        let buf = sh.malloc::<T>(len)?;
        let mine: Vec<T> = ref_vec(me, len, salt + k as u64);
        sh.put(buf, &mine, right)?;
        sh.barrier_all()?;
        let mut got = vec![T::default(); len];
        sh.get(&mut got, buf, me)?;
        assert_eq!(
            got,
            ref_vec::<T>(left, len, salt + k as u64),
            "{} len {len}: local copy",
            T::NAME
        );
        // A remote get of what I wrote into my right neighbour.
        let mut back = vec![T::default(); len];
        sh.get(&mut back, buf, right)?;
        assert_eq!(back, mine, "{} len {len}: remote get", T::NAME);
        sh.free(buf)?;
    }
    Ok(())
}

pe_test!(
    put_get_every_type,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    dev [2, 4],
    |sh| {
    ring_put_get::<i8>(sh, 1)?;
    ring_put_get::<i16>(sh, 2)?;
    ring_put_get::<i32>(sh, 3)?;
    ring_put_get::<i64>(sh, 4)?;
    ring_put_get::<isize>(sh, 5)?;
    ring_put_get::<u8>(sh, 6)?;
    ring_put_get::<u16>(sh, 7)?;
    ring_put_get::<u32>(sh, 8)?;
    ring_put_get::<u64>(sh, 9)?;
    ring_put_get::<usize>(sh, 10)?;
    ring_put_get::<f32>(sh, 11)?;
    ring_put_get::<f64>(sh, 12)
});

pe_test!(
    put_unaligned_offsets_into_byte_buffer,
    shm [2, 4],
    def [2, 4],
    fab [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let buf = sh.calloc::<u8>(4096 + 64)?;
        // Every PE writes a distinct, oddly placed window of PE 0's buffer.
        let (start, len) = (1 + 13 * me, 1000 + me);
        let data: Vec<u8> = ref_vec(me, len, 77);
        sh.put(buf.slice(start * 3..start * 3 + len)?, &data, 0)?;
        sh.barrier_all()?;
        if me == 0 {
            let mut all = vec![0u8; buf.len()];
            sh.get(&mut all, buf, 0)?;
            // Later PEs overwrite earlier ones where windows overlap; rebuild the expected picture in PE order is not
            // valid (writes race), so check only bytes written by exactly one PE, and that untouched bytes are zero.
            let mut owner = vec![Vec::new(); all.len()];
            for pe in 0..n {
                let (s, l) = ((1 + 13 * pe) * 3, 1000 + pe);
                for (i, o) in owner[s..s + l].iter_mut().enumerate() {
                    o.push((pe, i));
                }
            }
            for (b, (got, who)) in all.iter().zip(&owner).enumerate() {
                match who.as_slice() {
                    [] => assert_eq!(*got, 0, "byte {b} untouched"),
                    [(pe, i)] => assert_eq!(
                        *got,
                        ref_vec::<u8>(*pe, i + 1, 77)[*i],
                        "byte {b} from PE {pe}"
                    ),
                    many => assert!(
                        many.iter()
                            .any(|(pe, i)| ref_vec::<u8>(*pe, i + 1, 77)[*i] == *got),
                        "byte {b}"
                    ),
                }
            }
        }
        sh.free(buf)
    }
);

pe_test!(large_put_get_64mib, shm[2], def[2], fab[2], |sh| {
    let me = sh.my_pe();
    let len = 8 << 20; // 8 Mi u64 = 64 MiB
    let buf = sh.malloc::<u64>(len)?;
    let data: Vec<u64> = (0..len as u64).map(|i| i ^ ((me as u64) << 40)).collect();
    sh.put(buf, &data, 1 - me)?;
    sh.barrier_all()?;
    let mut got = vec![0u64; len];
    sh.get(&mut got, buf, me)?;
    let other = (1 - me) as u64;
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &v)| v == (i as u64) ^ (other << 40)),
        "64 MiB payload"
    );
    sh.free(buf)
});

// Large puts over every path a transport may take for them (over the fabric: a reused bounce buffer per put up to
// 4 MiB, several writes past it, waits for bounce buffers when more than their cap is in flight, the registered
// heap itself as the source of a blocking `put_sym`), at sizes around those thresholds and at odd offsets. Each
// PE checks its whole buffer, byte for byte, against a model of what its peer wrote; every source changes as
// soon as the call that put it returns (a blocking put may not read it later), and a put-with-signal's data is
// checked as soon as its signal is seen.
pe_test!(large_puts_every_path, shm[2], def[2], fab[2], |sh| {
    const K: usize = 1024;
    let me = sh.my_pe();
    let peer = 1 - me;
    let sizes = [
        32 * K - 1,
        32 * K,
        32 * K + 1,
        64 * K + 7,
        128 * K,
        1024 * K + 3,
        4096 * K,
        4096 * K + 5,
    ];
    let span = 4096 * K + 5 + 16;
    let buf = sh.calloc::<u8>(span)?;
    let heap_src = sh.calloc::<u8>(span)?;
    let sigs = sh.calloc::<u64>(1)?;
    let sig = sigs.at(0)?;
    let mut model = vec![0u8; span];
    let check = |model: &[u8], what: &str| -> Result<()> {
        let mut got = vec![0u8; span];
        sh.get(&mut got, buf, me)?;
        if let Some(i) = (0..span).find(|&i| got[i] != model[i]) {
            panic!(
                "{what}: byte {i} is {:#x}, the peer put {:#x}",
                got[i], model[i]
            );
        }
        Ok(())
    };
    let mut step = 0u64;
    for (k, &len) in sizes.iter().enumerate() {
        let off = 1 + k % 7;
        // A private source at an odd address, blocking put (over the fabric at 32 KiB and more: written in place
        // and waited for); the source changes on return.
        step += 1;
        let mut data: Vec<u8> = vec![0xC3; off];
        data.extend(ref_vec::<u8>(me, len, 1000 + step));
        sh.put(buf.slice(off..off + len)?, &data[off..], peer)?;
        data.iter_mut().for_each(|b| *b = !*b);
        sh.barrier_all()?;
        model[off..off + len].copy_from_slice(&ref_vec::<u8>(peer, len, 1000 + step));
        check(&model, &format!("put of {len} B at {off}"))?;
        sh.barrier_all()?;
        // The heap as the source (put_sym), from an odd offset; the source changes on return. One writer at a time,
        // while the target sleeps without calling in: what the target's transport has not taken when the put
        // returns stays in the source, which then changes.
        step += 1;
        let soff = 3 + k % 5;
        for writer in 0..2 {
            if me == writer {
                let data = ref_vec::<u8>(me, len, 1000 + step);
                sh.put(heap_src.slice(soff..soff + len)?, &data, me)?;
                sh.put_sym(
                    buf.slice(off + 1..off + 1 + len)?,
                    heap_src.slice(soff..soff + len)?,
                    peer,
                )?;
                sh.put(heap_src.slice(soff..soff + len)?, &vec![0xA5; len], me)?;
            } else {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            sh.barrier_all()?;
        }
        model[off + 1..off + 1 + len].copy_from_slice(&ref_vec::<u8>(peer, len, 1000 + step));
        check(
            &model,
            &format!("put_sym of {len} B from heap offset {soff} to {}", off + 1),
        )?;
        sh.barrier_all()?;
        // The non-blocking put_sym (over the fabric from 32 KiB: posted from the registered heap without a copy):
        // the two halves in flight at once, completed by quiet; the source changes only after.
        step += 1;
        let h = len / 2;
        sh.put(
            heap_src.slice(..len)?,
            &ref_vec::<u8>(me, len, 1000 + step),
            me,
        )?;
        let first = sh.put_sym_nbi(buf.slice(off..off + h)?, heap_src.slice(..h)?, peer)?;
        let second = sh.put_sym_nbi(
            buf.slice(off + h..off + len)?,
            heap_src.slice(h..len)?,
            peer,
        )?;
        sh.quiet()?;
        drop((first, second));
        sh.put(heap_src.slice(..len)?, &vec![0x3C; len], me)?;
        sh.barrier_all()?;
        model[off..off + len].copy_from_slice(&ref_vec::<u8>(peer, len, 1000 + step));
        check(
            &model,
            &format!("put_sym_nbi of {len} B in two halves at {off}"),
        )?;
        sh.barrier_all()?;
        // Put-with-signal: the data is all there once the signal is.
        step += 1;
        let mut data: Vec<u8> = ref_vec(me, len, 1000 + step);
        sh.put_signal(
            buf.slice(off..off + len)?,
            &data,
            sig,
            step,
            SignalOp::Set,
            peer,
        )?;
        data.iter_mut().for_each(|b| *b = !*b);
        sh.signal_wait_until(sig, Cmp::Ge, step)?;
        model[off..off + len].copy_from_slice(&ref_vec::<u8>(peer, len, 1000 + step));
        check(
            &model,
            &format!("put_signal of {len} B at {off}, on its signal"),
        )?;
        sh.barrier_all()?;
    }
    // Puts larger than the kernel's socket buffers absorb, one writer at a time while the target sleeps without
    // calling in: a transport that returned before taking all of the source would send bytes changed after.
    let len = 48 << 20;
    let big = sh.calloc::<u8>(len + 8)?;
    let big_src = sh.calloc::<u8>(len + 8)?;
    for (salt, from_heap) in [(7000u64, false), (7001, true)] {
        for writer in 0..2 {
            if me == writer {
                let mut data = ref_vec::<u8>(me, len, salt);
                if from_heap {
                    sh.put(big_src.slice(5..5 + len)?, &data, me)?;
                    sh.put_sym(big.slice(3..3 + len)?, big_src.slice(5..5 + len)?, peer)?;
                    sh.put(big_src.slice(5..5 + len)?, &vec![0xA5; len], me)?;
                } else {
                    sh.put(big.slice(3..3 + len)?, &data, peer)?;
                    data.iter_mut().for_each(|b| *b = !*b);
                    // Later puts from other sources reuse what the first one's copies freed.
                    sh.put(big.slice(..1)?, &[0x5A], peer)?;
                }
            } else {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            sh.barrier_all()?;
        }
        let mut got = vec![0u8; len];
        sh.get(&mut got, big.slice(3..3 + len)?, me)?;
        let want = ref_vec::<u8>(peer, len, salt);
        if let Some(i) = (0..len).find(|&i| got[i] != want[i]) {
            panic!(
                "{} put of {len} B: byte {i} is {:#x}, the peer put {:#x}",
                if from_heap {
                    "heap (put_sym)"
                } else {
                    "private"
                },
                got[i],
                want[i]
            );
        }
        sh.barrier_all()?;
    }
    sh.free(big_src)?;
    sh.free(big)?;
    // More bytes in flight than the bounce buffers may hold (24 non-blocking puts of 1 MiB + 1 from distinct
    // sources): later puts wait for earlier ones, and every one lands.
    let (n, len) = (24, 1024 * K + 1);
    let win = sh.calloc::<u8>(n * len)?;
    let srcs: Vec<Vec<u8>> = (0..n).map(|i| ref_vec(me, len, 5000 + i as u64)).collect();
    let mut hs = Vec::new();
    for (i, s) in srcs.iter().enumerate() {
        hs.push(sh.put_nbi(win.slice(i * len..(i + 1) * len)?, s, peer)?);
    }
    sh.quiet()?;
    drop(hs);
    sh.barrier_all()?;
    let mut got = vec![0u8; n * len];
    sh.get(&mut got, win, me)?;
    for i in 0..n {
        assert!(
            got[i * len..(i + 1) * len] == ref_vec::<u8>(peer, len, 5000 + i as u64)[..],
            "non-blocking put {i} of {n} ({len} B)"
        );
    }
    sh.barrier_all()?;
    sh.free(win)?;
    sh.free(sigs)?;
    sh.free(heap_src)?;
    sh.free(buf)
});

pe_test!(
    p_and_g_scalars,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    dev [2],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let ints = sh.calloc::<i64>(n)?;
        let floats = sh.calloc::<f32>(n)?;
        for pe in 0..n {
            sh.p(ints.at(me)?, -(me as i64) * 1000 - pe as i64, pe)?;
            sh.p(floats.at(me)?, me as f32 + 0.25, pe)?;
        }
        sh.barrier_all()?;
        for pe in 0..n {
            for src in 0..n {
                assert_eq!(sh.g(ints.at(src)?, pe)?, -(src as i64) * 1000 - pe as i64);
                assert_eq!(sh.g(floats.at(src)?, pe)?, src as f32 + 0.25);
            }
        }
        sh.free(floats)?;
        sh.free(ints)
    }
);

pe_test!(
    nbi_put_get_complete_after_wait_and_quiet,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    dev [2, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let buf = sh.calloc::<u32>(256 * n)?;
    let data: Vec<u32> = ref_vec(me, 256, 5);
    let mut handles = Vec::new();
    for pe in 0..n {
        handles.push(sh.put_nbi(buf.slice(256 * me..256 * (me + 1))?, &data, pe)?);
    }
    for h in handles {
        h.wait()?;
    }
    sh.barrier_all()?;
    let mut got = vec![0u32; 256 * n];
    let h = sh.get_nbi(&mut got, buf, (me + 1) % n)?;
    sh.quiet()?;
    drop(h);
    for pe in 0..n {
        assert_eq!(
            &got[256 * pe..256 * (pe + 1)],
            &ref_vec::<u32>(pe, 256, 5)[..],
            "block of PE {pe}"
        );
    }
    sh.free(buf)
});

pe_test!(
    strided_iput_iget,
    shm [1, 2, 4, 8],
    def [1, 2, 4, 8],
    fab [2, 4],
    dev [2, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let right = (me + 1) % n;
    let src: Vec<i32> = ref_vec(me, 60, 9);
    let buf = sh.calloc::<i32>(100)?;
    // 20 elements: every 3rd source element into every 5th target slot.
    sh.iput(buf, &src, 5, 3, 20, right)?;
    sh.barrier_all()?;
    let mut local = vec![0i32; 100];
    sh.get(&mut local, buf, me)?;
    let left_src: Vec<i32> = ref_vec((me + n - 1) % n, 60, 9);
    for (j, v) in local.iter().enumerate() {
        let expect = if j % 5 == 0 && j / 5 < 20 {
            left_src[3 * (j / 5)]
        } else {
            0
        };
        assert_eq!(*v, expect, "slot {j}");
    }
    // iget back every 5th element of the right neighbour into every 2nd slot.
    let mut out = vec![-1i32; 40];
    sh.iget(&mut out, buf, 2, 5, 20, right)?;
    for (j, v) in out.iter().enumerate() {
        let expect = if j % 2 == 0 { src[3 * (j / 2)] } else { -1 };
        assert_eq!(*v, expect, "iget slot {j}");
    }
    let e = sh.iput(buf, &src, 0, 1, 2, right).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { name: "dst_stride", value, .. } if value == "0"),
        "zero stride: {e}"
    );
    let e = sh.iput(buf, &src, 6, 1, 20, right).unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds { what: "element count", start: 0, len: 115, limit: 100, .. }),
        "destination span past the object: {e}"
    );
    let e = sh.iput(buf, &src, 1, 4, 20, right).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfBounds { what: "element count", start: 0, len: 77, limit: 60, context } if context == "iput source"),
        "source span past the slice: {e}"
    );
    sh.barrier_all()?;
    sh.free(buf)
});

pe_test!(
    ptr_gives_direct_access_on_the_node,
    shm [1, 2, 4],
    def [1, 2, 4],
    fab [2, 4],
    dev [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let buf = sh.calloc::<u64>(4)?;
        for pe in 0..n {
            let p = sh.ptr(buf, pe)?;
            if sh.transport_name(pe) == "fabric" {
                // XPUSHMEM_TRANSPORT=fabric: the peer is reached by RMA only, no load/store address.
                assert!(p.is_none() && !sh.is_mapped(pe), "PE {pe} over the fabric has no address");
                continue;
            }
            let p = p.expect("same-node peer is mapped");
            assert_eq!(p as usize % 8, 0);
            if pe == me {
                assert_eq!(p as usize, sh.heap_base() as usize + buf.heap_offset());
            }
        }
        assert!(matches!(sh.ptr(buf, n), Err(Error::InvalidPe { pe, .. }) if pe == n as i64));
        sh.barrier_all()?;
        sh.free(buf)
    }
);

pe_test!(
    symmetric_to_symmetric_put_and_get_and_casts,
    shm [1, 2, 4],
    def [1, 2, 4],
    fab [2, 4],
    dev [2, 4],
    |sh| {
        let (me, n) = (sh.my_pe(), sh.n_pes());
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let src = sh.malloc::<u32>(1000)?;
        let dst = sh.calloc::<u32>(1000)?;
        let back = sh.calloc::<u32>(1000)?;
        let mine: Vec<u32> = ref_vec(me, 1000, 31);
        sh.put(src, &mine, me)?;
        sh.barrier_all()?;
        sh.put_sym(dst.slice(1..1000)?, src.slice(0..999)?, right)?;
        sh.barrier_all()?;
        let mut got = vec![0u32; 1000];
        sh.get(&mut got, dst, me)?;
        let theirs: Vec<u32> = ref_vec(left, 1000, 31);
        assert_eq!(got[0], 0);
        assert_eq!(&got[1..], &theirs[..999], "put_sym from the left PE");
        sh.get_sym(back, src, right)?;
        sh.get(&mut got, back, me)?;
        assert_eq!(got, ref_vec::<u32>(right, 1000, 31), "get_sym from the right PE");
        // The streamed form (non-temporal stores between mapped heaps from 64 KiB): a longer copy, both ends off
        // the stores' 64-byte alignment, leaves the bytes around it untouched.
        const LONG: usize = 70_001;
        let big = sh.malloc::<u8>(LONG + 8)?;
        let into = sh.calloc::<u8>(LONG + 8)?;
        sh.put(big, &ref_vec::<u8>(me, LONG + 8, 7), me)?;
        sh.barrier_all()?;
        sh.get_sym_streamed(into.slice(3..3 + LONG)?, big.slice(5..5 + LONG)?, right)?;
        let mut long = vec![0u8; LONG + 8];
        sh.get(&mut long, into, me)?;
        let want = ref_vec::<u8>(right, LONG + 8, 7);
        assert_eq!(&long[..3], &[0; 3], "before the streamed copy");
        assert!(long[3..3 + LONG] == want[5..5 + LONG], "get_sym_streamed from the right PE");
        assert_eq!(&long[3 + LONG..], &[0; 5], "after the streamed copy");
        assert!(matches!(
            sh.get_sym_streamed(into, big.slice(0..10)?, right),
            Err(Error::OutOfBounds { .. })
        ), "destination longer than the source");
        sh.barrier_all()?;
        sh.free(into)?;
        sh.free(big)?;
        assert!(
            matches!(
                sh.put_sym(dst.slice(0..10)?, src, right),
                Err(Error::OutOfBounds { what: "element count", len: 1000, limit: 10, .. })
            ),
            "source longer than destination"
        );
        // Views: bytes and back, and a misaligned cast is an error.
        let bytes = src.as_bytes();
        assert_eq!(bytes.len(), 4000);
        assert_eq!(bytes.cast::<u32>()?, src);
        assert_eq!(bytes.cast::<u64>()?.len(), 500);
        assert!(matches!(
            bytes.slice(1..9)?.cast::<u32>(),
            Err(Error::InvalidArgument { name: "slice", .. })
        ));
        assert!(matches!(
            bytes.slice(0..6)?.cast::<u32>(),
            Err(Error::InvalidArgument { name: "slice", .. })
        ));
        sh.barrier_all()?;
        Ok(())
    }
);
