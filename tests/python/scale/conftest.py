"""The scale tests' real Dask cluster."""

from __future__ import annotations

import pytest

from quantformer.scale import dask as distributed


@pytest.fixture(scope="module")
def cluster():
    """A real LocalCluster: 2 worker processes (with nannies), 1 thread each; its address and
    a client."""
    from distributed import Client

    lc = distributed.local_cluster(2)
    client = Client(lc)
    try:
        yield lc.scheduler_address, client
    finally:
        client.close()
        lc.close()
