"""Right, another way: the consumer keeps up to two MMAs in flight (MmaWait(pending=2)) and releases the
slot of the step two back, whose MMA has finished. Keeping n in flight holds n slots while the next
one fills, so it keeps min(2, num_buffers - 1): none with one buffer, one with two."""

from course_lib import barriers
from course_lib.barriers import STAGE_BYTES, Arrive, ExpectTx, Load, Mma, MmaWait, Wait


def producer(k_steps, num_buffers, ready, empty):
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(empty[s], phase=(r % 2) ^ 1)
        yield ExpectTx(ready[s], STAGE_BYTES)
        yield Load(k, slot=s, bar=ready[s])


def consumer(k_steps, num_buffers, ready, empty):
    keep = min(2, num_buffers - 1)  # MMAs left running: each holds its slot
    for k in range(k_steps):
        s, r = k % num_buffers, k // num_buffers
        yield Wait(ready[s], phase=r % 2)
        yield Mma(slot=s)
        yield MmaWait(pending=keep)  # every MMA but the newest `keep` has finished
        if k >= keep:
            yield Arrive(empty[(k - keep) % num_buffers])
    yield MmaWait(pending=0)
    for k in range(max(k_steps - keep, 0), k_steps):
        yield Arrive(empty[k % num_buffers])


def ring_trace(k_steps, num_buffers, seed, schedule):
    return barriers.record(producer, consumer, k_steps=k_steps, num_buffers=num_buffers, seed=seed, schedule=schedule)
