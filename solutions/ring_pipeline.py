"""A producer/consumer ring with mbarriers: the main loop of a warp-specialized GEMM, in an emulator.

On a Hopper GPU a fast GEMM splits its warps into two roles that share a ring of ``num_buffers``
shared-memory slots. The *producer* (one warp) copies step k's A and B tiles into a slot with TMA;
the *consumer* (a warpgroup) multiplies them with wgmma. Neither waits for the other more than it
must: while the consumer multiplies step k, the producer is already loading k + 1, k + 2, ...
Two barriers per slot keep them in step:

* ``ready[s]``: "slot s holds its tile". The producer announces the bytes (``ExpectTx``), the TMA
  load counts them off as they land, and the phase completes when all have arrived.
* ``empty[s]``: "slot s may be refilled". The consumer arrives once its MMA on the slot has finished.

You write the two roles as generators that yield the operations of ``course_lib.barriers`` (each the
Gluon call named beside it); the course's emulator runs them interleaved in many orders, loads and
MMAs finishing as late as allowed, and checks every rule (see that module's docstring).

    Wait(bar, phase)       mbarrier.wait(bar, phase)
    ExpectTx(bar, nbytes)  mbarrier.expect(bar, nbytes)
    Load(k, slot, bar)     tma.async_load(desc, [off_m, k * BLOCK_K], bar, smem.index(slot))
                           (Triton 3.6 and 3.7 name it tma.async_copy_global_to_shared)
    Mma(slot)              acc = warpgroup_mma(a_smem.index(slot), b_smem.index(slot), acc, is_async=True)
    MmaWait(pending)       acc = warpgroup_mma_wait(num_outstanding=pending, deps=[acc])
    Arrive(bar)            mbarrier.arrive(bar, count=1)

Phases: slot s is used for the i-th time (round i) at k = i * num_buffers + s, and each barrier of
the ring completes one phase per round. A wait names only the parity of the phase it waits for:
``Wait(bar, phase=p)`` passes once the latest completed phase has parity p. A fresh barrier counts
as if a phase of parity 1 had just completed, so ``Wait(bar, 1)`` passes at once on it.

Try your roles in a notebook: ``barriers.simulate(producer, consumer, k_steps=8, num_buffers=3,
schedule="late").report()``.
"""

from course_lib import barriers
from course_lib.barriers import STAGE_BYTES, Arrive, ExpectTx, Load, Mma, MmaWait, Wait


def producer(k_steps, num_buffers, ready, empty):
    """Load the tiles of k = 0, 1, ..., k_steps - 1 into slot k % num_buffers, in order.

    Before loading into a slot, wait until the consumer has released it; then announce the bytes the
    load brings on ready[slot] and issue the load, which counts them off on ready[slot] as they land.
    """
    # BEGIN SOLUTION
    # TODO: for each k: slot s = k % num_buffers, round r = k // num_buffers. Wait on empty[s] (which
    # TODO: phase lets round 0 pass on a fresh barrier?), then ExpectTx(ready[s], STAGE_BYTES) and
    # TODO: Load(k, slot=s, bar=ready[s]).
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        # round r needs the consumer's release from round r - 1: the r-th completion of empty[s]. The
        # opposite parity, (r % 2) ^ 1, is 1 in round 0, which a fresh barrier lets through at once.
        yield Wait(empty[s], phase=(r % 2) ^ 1)
        # the one arrival of ready[s]'s phase, and the bytes that must land before it completes
        yield ExpectTx(ready[s], STAGE_BYTES)
        yield Load(k, slot=s, bar=ready[s])  # asynchronous: the TMA engine copies while we go on
    # END SOLUTION


def consumer(k_steps, num_buffers, ready, empty):
    """Multiply the tiles of k = 0, 1, ..., k_steps - 1 in order, each from slot k % num_buffers.

    Wait until a slot's tile has landed, multiply it (asynchronously), and release the slot to the
    producer only once no MMA can still be reading it. Every MMA must have finished before returning:
    the epilogue stores the accumulator next.
    """
    # BEGIN SOLUTION
    # TODO: for each k: slot s, round r as in the producer. Wait on ready[s] with this round's parity,
    # TODO: Mma(slot=s), then make sure that MMA has finished (MmaWait) before Arrive(empty[s]).
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(ready[s], phase=r % 2)  # the r-th completion of ready[s]: step k's tile has landed
        yield Mma(slot=s)  # wgmma runs asynchronously and reads slot s while it runs
        # pending=0: this MMA has finished, so slot s is no longer read. (pending=1 would leave it
        # running, and arriving on empty[s] then lets the producer overwrite the tile under it: the
        # Hopper bug. To keep one MMA in flight, release the *previous* step's slot after
        # MmaWait(pending=1) instead; that needs num_buffers >= 2.)
        yield MmaWait(pending=0)
        yield Arrive(empty[s])
    # END SOLUTION


def ring_trace(k_steps, num_buffers, seed, schedule):
    """Given (not part of the exercise): run both roles under the course's emulator and return the
    trace, which the grader replays and judges in its own process."""
    return barriers.record(producer, consumer, k_steps=k_steps, num_buffers=num_buffers, seed=seed, schedule=schedule)
