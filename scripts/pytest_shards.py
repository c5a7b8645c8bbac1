"""Run a pytest selection as N processes at once, split test by test (the GPU machine has 16 cores and
no pytest-xdist): python scripts/pytest_shards.py N LOG_PREFIX -- [pytest arguments]. Each shard's
output goes to LOG_PREFIX.<i>.txt; the summary lines of all shards are printed at the end, and the
exit code is 1 if any shard failed."""

from __future__ import annotations

import subprocess
import sys
import time


def main() -> int:
    shards, prefix = int(sys.argv[1]), sys.argv[2]
    args = sys.argv[sys.argv.index("--") + 1 :]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    ids = [line for line in listed if "::" in line]
    groups = [ids[i::shards] for i in range(shards)]
    start = time.time()
    procs = []
    for i, group in enumerate(groups):
        if not group:
            continue
        log = open(f"{prefix}.{i}.txt", "w")
        procs.append((subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *group],
                                       stdout=log, stderr=subprocess.STDOUT), log, i))  # fmt: skip
    failed = False
    for proc, log, i in procs:
        proc.wait()
        log.close()
        failed |= proc.returncode != 0
        lines = open(f"{prefix}.{i}.txt").read().splitlines()
        print(f"shard {i}: " + (lines[-1] if lines else "no output"))
        for line in lines:
            if line.startswith(("FAILED", "ERROR")):
                print("  " + line)
    print(f"{len(ids)} tests in {len(procs)} shards, {time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
