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

/// Every PE's offset of `s` as PE 0 sees them (through a world allocation, so every PE calls).
fn offsets_at_pe0<T: xpushmem::Symmetric>(
    sh: &xpushmem::Shmem,
    s: Option<xpushmem::SymSlice<T>>,
) -> xpushmem::Result<Vec<u64>> {
    let n = sh.n_pes();
    let all = sh.calloc::<u64>(n)?;
    let mine = s.map_or(u64::MAX, |s| s.heap_offset() as u64);
    sh.put(all.slice(sh.my_pe()..sh.my_pe() + 1)?, &[mine], 0)?;
    sh.barrier_all()?;
    let mut got = vec![0u64; n];
    if sh.my_pe() == 0 {
        sh.get(&mut got, all, 0)?;
    }
    sh.barrier_all()?;
    sh.free(all)?;
    Ok(got)
}

/// Issue #30 item 6: allocations scoped to a team. PE 0 alone allocates on a team of one, the other PEs on the
/// team without PE 0 (PE 0 does not call), then all on a split team of every PE: the members' histories differ,
/// so they agree on an offset free on each (two rounds), symmetric among them, zeroed by calloc, and data moves
/// between members at it; a world allocation afterwards gets the same offset on every PE, below the team space;
/// a mismatch within the team fails on every member and the team stays usable; a team allocation freed with the
/// world's free is an error naming team_free. Over the fabric (3 PEs: the team without PE 0 has 2 members), each
/// member's team-space chunks reach the other members through the allocations' closing agreements.
fn team_scoped(sh: &xpushmem::Shmem) -> xpushmem::Result<()> {
    let (me, n) = (sh.my_pe(), sh.n_pes());
    let world = sh.team_world();
    let solo = sh.team_split_strided(&world, 0, 1, 1, None)?;
    let rest = sh.team_split_strided(&world, 1, 1, n - 1, None)?;
    let all = sh
        .team_split_strided(&world, 0, 1, n, None)?
        .expect("every PE is a member");
    let a = match &solo {
        Some(t) => Some(sh.team_malloc::<u8>(t, 1000)?),
        None => None,
    };
    let c = match &rest {
        Some(t) => {
            let c = sh.team_malloc::<u64>(t, 375)?;
            // A ring among the members, at the agreed offset.
            let (r, k) = (t.my_pe(), t.n_pes());
            let next = t.global_pe((r + 1) % k)?;
            sh.put(c, &[me as u64; 375], next)?;
            sh.quiet()?;
            sh.team_sync(t)?;
            let mut got = [0u64; 375];
            sh.get(&mut got, c, me)?;
            let prev = t.global_pe((r + k - 1) % k)?;
            assert_eq!(got, [prev as u64; 375], "ring on the team without PE 0");
            Some(c)
        }
        None => None,
    };
    // Over the fabric a PE reaches only the team ranges of its own teams: PE 0 (not in the team without PE 0)
    // cannot put into PE 1's team space at the offset of its own solo allocation, where PE 1's allocation for
    // that team lies, whose chunk PE 1 published to that team's members only.
    if let (Some(a), true) = (
        a,
        std::env::var("XPUSHMEM_TRANSPORT").is_ok_and(|v| v == "fabric"),
    ) {
        let r = sh.put(a.slice(0..8)?, &[1u8; 8], 1);
        assert!(r.is_err(), "a put into another team's range of PE 1: {r:?}");
    }
    let offs = offsets_at_pe0(sh, c)?;
    if me == 0 {
        assert!(offs[1..].windows(2).all(|w| w[0] == w[1]), "{offs:?}");
    }
    // Every PE, on a split team: PE 0's history (1000 bytes) and the others' (3000) differ.
    let b = sh.team_calloc::<u32>(&all, 1250)?;
    let offs = offsets_at_pe0(sh, Some(b))?;
    if me == 0 {
        assert!(
            offs.windows(2).all(|w| w[0] == w[1]),
            "team offsets differ: {offs:?}"
        );
        assert!(
            offs[0] as usize >= sh.heap_max(),
            "in the team space: {offs:?}"
        );
    }
    let mut got = vec![1u32; 1250];
    sh.get(&mut got, b, (me + 1) % n)?;
    assert!(got.iter().all(|&x| x == 0), "team_calloc zeroes");
    sh.put(b, &vec![me as u32 + 7; 1250], (me + 1) % n)?;
    sh.barrier_all()?;
    sh.get(&mut got, b, me)?;
    assert_eq!(got, vec![((me + n - 1) % n) as u32 + 7; 1250]);
    // World allocations are unchanged: the same offset everywhere, in the world's space.
    let w = sh.malloc::<u8>(100)?;
    let offs = offsets_at_pe0(sh, Some(w))?;
    if me == 0 {
        assert!(
            offs.windows(2).all(|x| x[0] == x[1]) && (offs[0] as usize) < sh.heap_max(),
            "{offs:?}"
        );
    }
    // A mismatch within the team: every member fails, and the team goes on.
    let e = sh
        .team_malloc::<u8>(&all, if me == n - 1 { 64 } else { 128 })
        .unwrap_err();
    assert!(matches!(e, Error::Mismatch { .. }), "{e}");
    let e = sh.free(b).unwrap_err();
    assert!(e.to_string().contains("team_free"), "{e}");
    sh.team_free(&all, b)?;
    let again = sh.team_malloc::<u32>(&all, 1250)?;
    sh.team_free(&all, again)?;
    if let (Some(t), Some(c)) = (&rest, c) {
        sh.team_free(t, c)?;
    }
    if let (Some(t), Some(a)) = (&solo, a) {
        sh.team_free(t, a)?;
    }
    sh.free(w)?;
    for t in [solo, rest, Some(all)].into_iter().flatten() {
        sh.team_destroy(t)?;
    }
    Ok(())
}

pe_test!(
    team_scoped_allocations,
    shm [2, 4],
    fab [3],
    |sh| { team_scoped(sh) });
