"""Right, another way: the production protocol of solutions/ws_matmul.py. The consumer keeps one MMA
in flight: after MmaWait(pending=1) the MMA just issued may still run, so it releases the slot of the
previous step, whose MMA has finished, and after the loop waits for the last one and releases its
slot. That needs a second slot to fill while one is held: with one buffer it falls back to
MmaWait(pending=0) and releases the slot at once."""

from course_lib import barriers
from course_lib.barriers import STAGE_BYTES, Arrive, ExpectTx, Load, Mma, MmaWait, Wait


def producer(k_steps, num_buffers, ready, empty):
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(empty[s], phase=(r % 2) ^ 1)
        yield ExpectTx(ready[s], STAGE_BYTES)
        yield Load(k, slot=s, bar=ready[s])


def consumer(k_steps, num_buffers, ready, empty):
    if num_buffers == 1:  # nothing can overlap the MMA: the one slot is read until it finishes
        for k in range(k_steps):
            yield Wait(ready[0], phase=k % 2)
            yield Mma(slot=0)
            yield MmaWait(pending=0)
            yield Arrive(empty[0])
        return
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(ready[s], phase=r % 2)
        yield Mma(slot=s)
        yield MmaWait(pending=1)  # the MMA of k - 1 has finished; the one of k may still run
        if k > 0:
            yield Arrive(empty[(k - 1) % num_buffers])
    yield MmaWait(pending=0)
    yield Arrive(empty[(k_steps - 1) % num_buffers])


def ring_trace(k_steps, num_buffers, seed, schedule):
    return barriers.record(producer, consumer, k_steps=k_steps, num_buffers=num_buffers, seed=seed, schedule=schedule)
