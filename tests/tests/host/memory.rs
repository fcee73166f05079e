//! Collective memory management: offsets agree on every PE, calloc zeroes reused memory, align aligns, free
//! returns space, zero-length allocations work, the heap grows on demand.

use xpushmem::Error;
use xpushmem_tests::pe_test;

pe_test!(
    allocations_agree_and_reuse,
    shm [1, 2, 4, 8],
    dev [2, 4],
    |sh| {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let a = sh.malloc::<u8>(1000)?;
    let b = sh.align::<u64>(4096, 10)?;
    let c = sh.calloc::<f32>(3)?;
    assert_eq!(
        (b.heap_offset() + sh.heap_base() as usize) % 4096,
        0,
        "align"
    );
    // Every PE reports its offsets to PE 0, which checks they agree.
    let offs = sh.calloc::<u64>(3 * n)?;
    let mine = [
        a.heap_offset() as u64,
        b.heap_offset() as u64,
        c.heap_offset() as u64,
    ];
    sh.put(offs.slice(3 * me..3 * me + 3)?, &mine, 0)?;
    sh.barrier_all()?;
    if me == 0 {
        let mut all = vec![0u64; 3 * n];
        sh.get(&mut all, offs, 0)?;
        for pe in 0..n {
            assert_eq!(&all[3 * pe..3 * pe + 3], &mine[..], "PE {pe} offsets");
        }
    }
    // Dirty a's memory, free it, calloc over it: must read zero.
    sh.put(a, &[0xAB; 1000], me)?;
    sh.free(a)?;
    let z = sh.calloc::<u8>(1000)?;
    assert_eq!(
        z.heap_offset(),
        a.heap_offset(),
        "first fit reuses the hole"
    );
    let mut got = vec![1u8; 1000];
    sh.get(&mut got, z, (me + 1) % n)?;
    assert!(got.iter().all(|&x| x == 0), "calloc zeroes");
    let empty = sh.malloc::<u64>(0)?;
    assert!(empty.is_empty());
    sh.put(empty, &[], (me + 1) % n)?;
    sh.free(empty)?;
    let before = sh.heap_in_use();
    sh.free(z)?;
    sh.free(offs)?;
    sh.free(c)?;
    sh.free(b)?;
    assert!(sh.heap_in_use() < before);
    Ok(())
});

pe_test!(
    sub_slices_and_addresses,
    shm [1, 2],
    |sh| {
    let buf = sh.malloc::<u32>(16)?;
    let mid = buf.slice(4..12)?;
    assert_eq!(mid.len(), 8);
    assert_eq!(mid.heap_offset(), buf.heap_offset() + 16);
    let addr = sh.heap_base() as usize + mid.heap_offset();
    assert_eq!(sh.sym_slice_from_addr::<u32>(addr, 8)?, mid);
    assert!(matches!(
        buf.slice(10..20),
        Err(Error::OutOfBounds {
            what: "element range",
            start: 10,
            len: 10,
            limit: 16,
            ..
        })
    ));
    assert!(matches!(
        buf.at(16),
        Err(Error::OutOfBounds {
            what: "element index",
            start: 16,
            limit: 16,
            ..
        })
    ));
    sh.barrier_all()?;
    sh.free(buf)
});

/// 64 bytes that name the PE that wrote them and the spot.
fn spot_bytes(pe: usize, spot: usize) -> Vec<u8> {
    (0..64u64)
        .map(|i| (i ^ (pe as u64 * 31 + spot as u64 * 7 + 1)) as u8)
        .collect()
}

/// Issue #30 item 4: with no variable set (a 1 GiB first chunk), a 4 GiB allocation grows the heap on every PE
/// (sparse: only the touched pages cost memory); each PE writes a few spots at both ends and in the middle of the
/// new allocation into its right neighbour's heap, and reads them back from its own heap and from the
/// neighbour's. The heap stays symmetric (same offsets), an allocation beyond the maximum is an argument error.
fn heap_growth(sh: &xpushmem::Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    for var in ["XPUSHMEM_SYMMETRIC_SIZE", "XPUSHMEM_SYMMETRIC_MAX"] {
        assert!(std::env::var_os(var).is_none(), "{var} must be unset");
    }
    let first = sh.heap_size();
    assert_eq!(first, 1 << 30, "the default first chunk");
    assert!(
        sh.heap_max() >= 1 << 40,
        "1 TiB reserved: {}",
        sh.heap_max()
    );
    let small = sh.malloc::<u64>(8)?;
    const BIG: usize = 4 << 30;
    let big = sh.malloc::<u8>(BIG)?;
    assert!(
        big.heap_offset() + BIG <= sh.heap_size(),
        "mapped to its end"
    );
    assert!(
        sh.heap_size() > first && sh.heap_size() % first == 0,
        "grown by whole chunks: {}",
        sh.heap_size()
    );
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // Both ends, the middle, and 64 bytes across the first chunk's end (two registrations on the fabric).
    let cross = first - big.heap_offset() - 32;
    let spots = [
        0,
        3 * 4096 + 5,
        cross,
        BIG / 2 - 32,
        BIG - 4096 - 7,
        BIG - 64,
    ];
    for (i, &at) in spots.iter().enumerate() {
        sh.put(big.slice(at..at + 64)?, &spot_bytes(me, i), right)?;
    }
    sh.barrier_all()?;
    for (i, &at) in spots.iter().enumerate() {
        let mut mine = vec![0u8; 64];
        sh.get(&mut mine, big.slice(at..at + 64)?, me)?;
        assert_eq!(
            mine,
            spot_bytes(left, i),
            "spot {i} at {at}: written by PE {left}"
        );
        let mut theirs = vec![0u8; 64];
        sh.get(&mut theirs, big.slice(at..at + 64)?, right)?;
        assert_eq!(theirs, spot_bytes(me, i), "spot {i} at {at} on PE {right}");
    }
    // Atomics and put-with-signal in the grown part (past the 4 GiB allocation).
    let words = sh.calloc::<u64>(2)?;
    assert!(words.heap_offset() >= first, "{words:?}");
    sh.atomic_add(words.at(0)?, me as u64 + 1, right)?;
    let tail = big.slice(BIG - 128..BIG - 64)?;
    sh.put_signal(
        tail,
        &spot_bytes(me, 99),
        words.at(1)?,
        1,
        xpushmem::SignalOp::Set,
        right,
    )?;
    sh.signal_wait_until(words.at(1)?, xpushmem::Cmp::Eq, 1)?;
    let mut got = vec![0u8; 64];
    sh.get(&mut got, tail, me)?;
    assert_eq!(got, spot_bytes(left, 99), "put_signal data with its signal");
    sh.barrier_all()?;
    assert_eq!(
        sh.atomic_fetch(words.at(0)?, me)?,
        left as u64 + 1,
        "atomic_add"
    );
    sh.barrier_all()?;
    sh.free(words)?;
    // The small allocation made before the growth still works, and its address is the same offset everywhere.
    sh.put(small, &[me as u64; 8], right)?;
    sh.barrier_all()?;
    let mut got = [0u64; 8];
    sh.get(&mut got, small, me)?;
    assert_eq!(got, [left as u64; 8]);
    sh.barrier_all()?;
    sh.free(big)?;
    let max = sh.heap_max();
    let e = sh.malloc::<u8>(max + 1).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { .. })
            && e.to_string().contains(&format!("limit {max} bytes")),
        "{e}"
    );
    sh.free(small)
}

pe_test!(
    heap_grows_on_demand,
    shm [1, 2],
    def [2],
    fab [2],
    |sh| { heap_growth(sh) });
