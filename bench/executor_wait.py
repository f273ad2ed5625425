"""How ``dispatch.Executor`` waits for many calls, on the local adapter: ``--calls`` calls submitted in one
``with ex.batch():`` block, then ``concurrent.futures.as_completed`` over their futures.

* ``submit_s``: from the first ``submit`` to the end of the block (the calls written, one batched submission);
* ``first_s``, ``all_s``: from the end of the block to the first and to the last result;
* ``threads_before``, ``threads_peak``: threads alive in this process before submitting and at most while
  waiting (a future needs no thread: the executor's one collector settles them all);
* ``collectors_peak``: the most collector threads alive at once (1).

    python bench/executor_wait.py --calls 1000 --json

Records go to a memory store, the local adapter's state to a temporary directory. Prints {"calls", "submit_s",
"first_s", "all_s", "threads_before", "threads_peak", "collectors_peak"}.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import tempfile
import threading
import time

import dispatch
from dispatch.records.memory import MemoryRecords


def square(x: int) -> int:
    return x * x


def measure(calls: int, poll: float) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory(prefix="dispatch-bench-") as state:
        adapter = {"stateDir": state, "grace": 1}
        with dispatch.open("local", adapter=adapter, records=MemoryRecords()) as cluster:
            before = threading.active_count()
            with dispatch.Executor(cluster, poll=poll) as ex:
                started = time.monotonic()
                with ex.batch():
                    futures = [ex.submit(square, i) for i in range(calls)]
                submitted = time.monotonic()
                peak, collectors, first = before, 0, None
                for n, future in enumerate(concurrent.futures.as_completed(futures)):
                    future.result()
                    if n == 0:
                        first = time.monotonic() - submitted
                    peak = max(peak, threading.active_count())
                    collectors = max(collectors, sum(t.name == "dispatch-executor" for t in threading.enumerate()))
                done = time.monotonic()
    return {
        "calls": calls,
        "submit_s": round(submitted - started, 3),
        "first_s": round(first or 0.0, 3),
        "all_s": round(done - submitted, 3),
        "threads_before": before,
        "threads_peak": peak,
        "collectors_peak": collectors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls in the batch (default 1000)")
    parser.add_argument("--poll", type=float, default=0.25, help="the executor's poll in seconds (default 0.25)")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    result = measure(args.calls, args.poll)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
