"""A PE of tests/test_core_api.py: ``python core_prog.py {env|mpi}`` under ``xpushmem-run -n N`` (``env``) or
``mpirun -n N`` with mpi4py (``mpi``). Exercises xpushmem.core's whole host API against NumPy references computed
from what every PE is known to contribute, then its errors; prints ``core_prog OK on PE <pe> of <n>``.
Not a pytest module (its name does not start with ``test_``)."""

from __future__ import annotations

import sys

import numpy as np

import xpushmem.core as xc


def contribution(pe: int, n: int, dtype) -> np.ndarray:
    """What PE `pe` reduces: small values, so that sums and products stay exact in every dtype."""
    return ((np.arange(n + 3) * (pe + 1)) % 5 + 1).astype(dtype)


def main() -> None:
    mode = sys.argv[1]
    if mode == "mpi":
        from mpi4py import MPI

        xc.init(mpi_comm=MPI.COMM_WORLD)
        assert xc.my_pe() == MPI.COMM_WORLD.Get_rank() and xc.n_pes() == MPI.COMM_WORLD.Get_size()
    else:
        xc.init()
    assert xc.initialized()
    me, n = xc.my_pe(), xc.n_pes()
    right, left = (me + 1) % n, (me - 1) % n

    # put / get, blocking and not: a ring.
    a = xc.array(16, np.float64)
    xc.put(a, np.full(16, float(me)), right)
    xc.barrier_all()
    assert (a == left).all(), a
    got = np.zeros(16)
    xc.get(got, a, right)
    assert (got == me).all(), got  # a on my right holds what I put there
    b = xc.array((4, 8), np.int32)
    xc.put_nbi(b, np.arange(32, dtype=np.int32).reshape(4, 8) + 100 * me, right)
    xc.quiet()
    xc.barrier_all()
    assert (b == np.arange(32).reshape(4, 8) + 100 * left).all(), b
    got = np.zeros((4, 8), np.int32)
    xc.get_nbi(got, b, left)
    xc.quiet()
    assert (got == np.arange(32).reshape(4, 8) + 100 * ((left - 1) % n)).all(), got

    # put with signal: a set on my right, an add on PE 0 from everyone.
    data = xc.array(64, np.uint8)
    sig = xc.array(2, np.uint64)
    xc.put_signal(data, np.full(64, me, np.uint8), sig, 7, xc.SIGNAL_SET, right)
    assert xc.signal_wait_until(sig, xc.CMP_EQ, 7) == 7
    assert (data == left).all(), data
    xc.barrier_all()  # everyone checked before PE 0's data is overwritten
    xc.put_signal(data[:8], np.full(8, 200, np.uint8), sig, 1, xc.SIGNAL_ADD, 0, index=1, nbi=True)
    xc.quiet()
    if me == 0:
        assert xc.signal_wait_until(sig, xc.CMP_GE, n, index=1) == n
        assert xc.signal_fetch(sig, 1) == n and (data[:8] == 200).all()
    xc.barrier_all()

    # Collectives on the world.
    root = n - 1
    bsrc = xc.array(10, np.int64)
    bsrc[:] = np.arange(10) + 1000 * me
    bdst = xc.array(10, np.int64)
    xc.broadcast(bdst, bsrc, root)
    assert (bdst == np.arange(10) + 1000 * root).all(), bdst
    fsrc = xc.array(3, np.float32)
    fsrc[:] = [me, me + 0.5, -me]
    fdst = xc.array(3 * n, np.float32)
    xc.fcollect(fdst, fsrc)
    want = np.concatenate([[p, p + 0.5, -p] for p in range(n)]).astype(np.float32)
    assert (fdst == want).all(), fdst
    asrc = xc.array(2 * n, np.int16)
    asrc[:] = np.repeat(np.arange(n) + 10 * me, 2)
    adst = xc.array(2 * n, np.int16)
    xc.alltoall(adst, asrc)
    assert (adst == np.repeat(10 * np.arange(n) + me, 2)).all(), adst
    for dtype, ops in ((np.int64, ("sum", "prod", "min", "max")), (np.float32, ("sum", "max")),
                       (np.uint32, ("and", "or", "xor"))):
        src = xc.array(n + 3, dtype)
        dst = xc.array(n + 3, dtype)
        src[:] = contribution(me, n, dtype)
        everyone = [contribution(p, n, dtype) for p in range(n)]
        for op in ops:
            xc.reduce(dst, src, op)
            ref = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "and": np.bitwise_and.reduce,
                   "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}[op](np.stack(everyone), axis=0)
            assert (dst == ref.astype(dtype)).all(), (op, dtype, dst, ref)
        xc.free(dst)
        xc.free(src)

    # A team of the even PEs: numbering, translation, a reduction inside it (allocations are over the world).
    tsrc, tdst = xc.array(1, np.int64), xc.array(1, np.int64)
    evens = xc.TEAM_WORLD.split_strided(0, 2, (n + 1) // 2)
    if me % 2:
        assert evens is None
    else:
        assert evens.my_pe() == me // 2 and evens.n_pes() == (n + 1) // 2
        assert evens.translate_pe(evens.n_pes() - 1, xc.TEAM_WORLD) == 2 * (evens.n_pes() - 1)
        assert xc.TEAM_WORLD.translate_pe(me, evens) == me // 2
        tsrc[:] = me
        xc.reduce(tdst, tsrc, "sum", team=evens)
        assert tdst[0] == sum(range(0, n, 2)), tdst
        evens.sync()
        evens.destroy()
    # The same PEs as a team made by them only (the odd PEs never call), listed last first: numbering follows the
    # list, and a reduction runs inside it.
    if me % 2 == 0:
        listed = list(range(0, n, 2))[::-1]
        mine = xc.Team.of_members(listed, tag=7)
        assert mine.my_pe() == listed.index(me) and mine.n_pes() == len(listed)
        assert mine.translate_pe(0, xc.TEAM_WORLD) == listed[0]
        xc.reduce(tdst, tsrc, "sum", team=mine)
        assert tdst[0] == sum(range(0, n, 2)), tdst
        mine.destroy()
    xc.barrier_all()
    xc.free(tdst)
    xc.free(tsrc)
    assert xc.TEAM_SHARED.n_pes() >= 1

    # Torch tensors on the symmetric heap share the memory of the NumPy arrays (at 2 PEs under xpushmem-run only:
    # importing torch costs each process seconds).
    if mode == "env" and n == 2:
        import torch

        t = xc.tensor(4, torch.float64)
        xc.put(t, torch.full((4,), float(me), dtype=torch.float64), right)
        xc.barrier_all()
        assert torch.equal(t, torch.full((4,), float(left), dtype=torch.float64)), t
        xc.free(t)

    # Errors: each raises the class of its code, with the library's message naming the argument.
    for call, cls, words in (
        (lambda: xc.put(a, np.zeros(16), n), xc.InvalidPeError, f"invalid PE {n}"),
        (lambda: xc.put(np.zeros(16), np.zeros(16), right), xc.NotSymmetricError, "symmetric"),
        (lambda: xc.put(a, np.zeros(17), right), xc.OutOfBoundsError, "fewer than"),
        (lambda: xc.reduce(bdst, bsrc, "bogus"), xc.InvalidArgumentError, "'bogus'"),
        (lambda: xc.reduce(fdst[:3], fsrc, "xor"), xc.InvalidArgumentError, "float32"),
        (lambda: xc.free(a[1:]), xc.InvalidArgumentError, "not the start"),
        (lambda: xc.init(uid=b"short", rank=0, nranks=1), xc.InvalidArgumentError, "uid"),
    ):
        try:
            call()
        except cls as e:
            assert isinstance(e, xc.XpushmemError) and e.code == cls.code, e
            assert words in str(e), (str(e), words)
        else:
            raise AssertionError(f"no {cls.__name__} (expected a message with {words!r})")
    # A collective the PEs disagree on is an error on every PE, not a hang.
    try:
        xc.broadcast(bdst, bsrc, me)
    except xc.MismatchError as e:
        assert "root" in str(e).lower() or "mismatch" in str(e).lower(), e
    else:
        raise AssertionError("broadcast with a different root on every PE did not fail")

    for arr in (asrc, adst, fsrc, fdst, bsrc, bdst, sig, data, b, a):
        xc.free(arr)
    xc.finalize()
    print(f"core_prog OK on PE {me} of {n}", flush=True)


if __name__ == "__main__":
    main()
