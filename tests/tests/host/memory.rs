//! Collective memory management: offsets agree on every PE, calloc zeroes reused memory, align aligns, free
//! returns space, zero-length allocations work.

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
