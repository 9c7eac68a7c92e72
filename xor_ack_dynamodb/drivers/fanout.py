"""Many independent jobs at a bounded concurrency, with progress: how a batch call runs
its groups of chains (:meth:`~xor_ack_dynamodb.drivers.Driver.run_many`).

Written twice by hand (not generated), since the two flavours wait differently.

Both call ``progress(done, total)`` in the caller's own thread (or task): once with 0
before the first job, then after each job, ``done`` summing what the jobs returned. The
first job to raise (or a ``progress`` that raises) ends the run: jobs not started are
not started, the running ones are waited for, and that exception propagates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Sequence

from ..errors import InvalidConfig

#: ``progress(done, total)``: how many of a batch's chains are settled, of how many.
Progress = Callable[[int, int], None]


def check_concurrency(value: object) -> int:
    """``value`` as a concurrency (an int of at least 1); :class:`InvalidConfig` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidConfig(f"concurrency must be an int of at least 1, got {value!r}")
    return value


def check_batch_options(concurrency: object, progress: object, transactions: object = True) -> None:
    """A batch call's ``concurrency`` (None or an int of at least 1), ``progress`` (None
    or a callable) and ``transactions`` (a bool), checked before any request:
    :class:`InvalidConfig` otherwise."""
    if not isinstance(transactions, bool):
        raise InvalidConfig(f"transactions must be True or False, got {transactions!r}")
    if concurrency is not None:
        check_concurrency(concurrency)
    if progress is not None and not callable(progress):
        raise InvalidConfig(f"progress must be a callable(done, total) or None, got {progress!r}")


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


class FanOut:
    """Runs jobs on at most ``limit`` threads (in the calling thread when ``limit`` is 1
    or there is one job)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def run(self, jobs: Sequence[Callable[[], int]], total: int, progress: Progress | None) -> None:
        done = 0
        _report(progress, done, total)
        if self.limit == 1 or len(jobs) <= 1:
            for job in jobs:
                done += job()
                _report(progress, done, total)
            return
        with concurrent.futures.ThreadPoolExecutor(min(self.limit, len(jobs)), "xor-ack-batch") as pool:
            futures = [pool.submit(job) for job in jobs]
            try:
                for future in concurrent.futures.as_completed(futures):
                    done += future.result()
                    _report(progress, done, total)
            except BaseException:
                for future in futures:
                    future.cancel()  # the running ones are waited for when the pool closes
                raise


class AsyncFanOut:
    """Runs jobs as tasks of the running loop, at most ``limit`` at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def run(
        self, jobs: Sequence[Callable[[], Awaitable[int]]], total: int, progress: Progress | None
    ) -> None:
        done = 0
        _report(progress, done, total)
        gate = asyncio.Semaphore(self.limit)
        stopping = False

        async def gated(job: Callable[[], Awaitable[int]]) -> int:
            async with gate:
                return 0 if stopping else await job()

        tasks = [asyncio.ensure_future(gated(job)) for job in jobs]
        try:
            for next_done in asyncio.as_completed(tasks):
                done += await next_done
                _report(progress, done, total)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        except BaseException:
            stopping = True  # as the thread pool: none started from now, the running awaited
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
