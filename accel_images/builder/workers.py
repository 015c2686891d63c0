"""Running one job per variant on a pool of worker threads, stoppable by Ctrl-C.

Ctrl-C reaches the main thread only. When it does, what has not started is cancelled and a
stop is requested (accel_images.stopping), so the workers still running end at their next
checkpoint instead of going on to a smoke test or a promotion; then the interrupt goes on up
to the caller's cleanup.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar
from collections.abc import Callable, Sequence

from accel_images import stopping

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_each(work: Callable[[Item], Result], items: Sequence[Item], jobs: int) -> list[Result]:
    """`work` on every item, `jobs` at a time; results in the order given.

    Ctrl-C cancels what has not started and re-raises, so the caller's cleanup runs.
    """
    if jobs <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    results: dict[int, Result] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build") as pool:
        futures = {pool.submit(work, item): index for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
        except KeyboardInterrupt:
            stopping.request_stop()  # running workers stop at their next checkpoint
            for future in futures:
                future.cancel()
            raise
    return [results[index] for index in range(len(items))]
