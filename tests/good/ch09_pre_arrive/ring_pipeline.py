"""Right, another way: instead of the opposite parity, the consumer arrives once on every empty[s]
before its loop (every slot starts free, as a release of round -1), and the producer waits on
empty[s] with the round's own parity, r % 2."""

from course_lib import barriers
from course_lib.barriers import STAGE_BYTES, Arrive, ExpectTx, Load, Mma, MmaWait, Wait


def producer(k_steps, num_buffers, ready, empty):
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(empty[s], phase=r % 2)
        yield ExpectTx(ready[s], STAGE_BYTES)
        yield Load(k, slot=s, bar=ready[s])


def consumer(k_steps, num_buffers, ready, empty):
    for s in range(num_buffers):
        yield Arrive(empty[s])
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(ready[s], phase=r % 2)
        yield Mma(slot=s)
        yield MmaWait(pending=0)
        yield Arrive(empty[s])


def ring_trace(k_steps, num_buffers, seed, schedule):
    return barriers.record(producer, consumer, k_steps=k_steps, num_buffers=num_buffers, seed=seed, schedule=schedule)
