"""The Dask engine of partitioned runs and of tune/compare: parsing ``scheduler``, a
LocalCluster or a running scheduler, and :func:`map_runs`, which maps a function over items
with retries and progress.
"""

from __future__ import annotations

import contextlib
import os
import socket

from .._core.errors import InputError

TASK_RETRIES = 2  # retries of a task that raised an internal error (Client.submit)


# ------------------------------------------------------------------------------------------
# the engine


def parse_scheduler(scheduler: str | None):
    """``None``, ``("local", N)`` or ``("address", "tcp://...")``.

    Raises:
        InputError: anything else (the message shows both accepted forms).
    """
    if scheduler is None:
        return None
    s = str(scheduler).strip()
    if s.startswith("local:") and s[6:].isdigit() and int(s[6:]) > 0:
        return ("local", int(s[6:]))
    if "://" in s and len(s.split("://", 1)[1]) > 0:
        return ("address", s)
    raise InputError(f"{{scheduler}} '{scheduler}' is not understood; use local:N (N worker "
                     "processes on this machine) or the address of a running Dask scheduler, "
                     "e.g. tcp://10.0.0.5:8786", params=["scheduler"])


def check_scheduler_reachable(scheduler: str | None, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to a ``tcp://host:port`` scheduler before anything is
    written: nothing listening fails in milliseconds, not after Dask's 30 s connect timeout.

    Raises:
        InputError: the address cannot be reached (the message names it and the fix).
    """
    from urllib.parse import urlparse

    how = parse_scheduler(scheduler)
    if how is None or how[0] != "address":
        return
    url = urlparse(how[1])
    if url.scheme not in ("tcp", "tls") or not url.hostname or not url.port:
        return  # other transports (ucx, inproc): left to Dask
    try:
        socket.create_connection((url.hostname, url.port), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler at {how[1]} "
                         f"({exc.strerror or exc}); start it first (dask scheduler, or a "
                         "dask-jobqueue cluster), or check {scheduler}",
                         params=["scheduler"]) from None


def torch_threads(n_workers: int) -> int:
    """Torch threads per worker so that workers x threads fits this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // n_workers)


# Dask's statistical profiler samples every worker thread's stack every 10 ms; over torch's
# deep stacks that costs CPU for nothing here (tasks are long, one per partition)
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def local_cluster(n_workers: int):
    """A :class:`distributed.LocalCluster` of ``n_workers`` processes, 1 Dask thread each,
    profiler off (:data:`WORKER_CONFIG`); a context manager."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(WORKER_CONFIG):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0")


@contextlib.contextmanager
def dask_client(scheduler: str | None):
    """A :class:`distributed.Client` for ``scheduler`` (None yields None); a LocalCluster
    started here is closed on exit."""
    how = parse_scheduler(scheduler)
    if how is None:
        yield None
        return
    from distributed import Client

    if how[0] == "local":
        with local_cluster(how[1]) as cluster, Client(cluster) as client:
            client.quantformer_threads = torch_threads(how[1])
            try:
                yield client
            finally:
                _close_quietly(client, cluster)
    else:
        check_scheduler_reachable(scheduler)
        try:
            client = Client(how[1], timeout="30s")
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler at {how[1]} ({exc}); start it "
                             "first (dask scheduler, or a dask-jobqueue cluster)") from exc
        with client:
            client.quantformer_threads = None
            yield client


#: seconds a LocalCluster's worker process gets to exit before its nanny kills it (Dask's
#: default, 4 s, is too short for a worker that holds torch on a busy machine: "Worker process
#: still alive after 4.0 seconds, killing", then a "leaked semaphore" at exit)
WORKER_CLOSE_SECONDS = 30


async def _close_workers(cluster, timeout: float) -> None:
    import asyncio

    await asyncio.gather(*(w.close(timeout=timeout) for w in list(cluster.workers.values())),
                         return_exceptions=True)


def _close_quietly(client, cluster) -> None:
    """Stop a LocalCluster started here in order: tasks cancelled, each worker closed by its
    nanny with :data:`WORKER_CLOSE_SECONDS` to exit on its own, then the cluster."""
    with contextlib.suppress(Exception):
        client.cancel(list(client.futures))
    with contextlib.suppress(Exception):
        cluster.sync(_close_workers, cluster, WORKER_CLOSE_SECONDS)


def _task_attempts(dask_scheduler, key) -> dict | None:
    ts = dask_scheduler.tasks.get(key)
    if ts is None:
        return None
    return {"workers_lost": int(ts.suspicious), "retries_left": int(ts.retries)}


def attempts(client, key) -> dict:
    """How often a finished task was run again: ``workers_lost`` (workers that died while it
    ran there: the scheduler's ``suspicious`` count) and ``retries`` (errors retried, of
    :data:`TASK_RETRIES`); empty when the scheduler cannot say (e.g. quantformer is not
    installed beside a remote scheduler)."""
    try:
        got = client.run_on_scheduler(_task_attempts, key=key)
    except Exception:
        return {}
    if not got:
        return {}
    return {"workers_lost": got["workers_lost"],
            "retries": max(0, TASK_RETRIES - got["retries_left"])}


def map_runs(fn, items: list, scheduler: str | None = None, on_result=None) -> list:
    """``[fn(x) for x in items]``, fanned out over ``scheduler`` (``None``: in this process).

    Used by ``tune`` and ``compare`` for their independent runs; results come back in the
    order of ``items`` whatever order they finish in, so they equal the serial run's.
    ``on_result(i, result)`` is called as each finishes (for progress lines).
    """
    results = [None] * len(items)
    with dask_client(scheduler) as client:
        if client is None:
            for i, x in enumerate(items):
                results[i] = fn(x)
                if on_result:
                    on_result(i, results[i])
            return results
        from distributed import as_completed

        futures = {client.submit(fn, x, retries=TASK_RETRIES, pure=False): i
                   for i, x in enumerate(items)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_result:
                on_result(i, results[i])
    return results


