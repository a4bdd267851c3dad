"""The manifest of a partitioned run (``manifest.json``): the job's log, rewritten atomically
after every partition, which ``resume`` reads.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from pathlib import Path

from .._core.atomic import write_text
from .._core.errors import InputError
from .._core.version import versions

MANIFEST = "manifest.json"


# ------------------------------------------------------------------------------------------
# the manifest


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _versions() -> dict:
    return versions(("torch", "transformers", "dask", "distributed", "pandas", "pyarrow"))


class Manifest:
    """``manifest.json`` of an output folder: the job's settings and one entry per finished
    partition. :meth:`save` writes it atomically."""

    def __init__(self, folder: Path, job: dict):
        self.path = Path(folder) / MANIFEST
        old = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else None
        if old is not None and old.get("job") != job:
            raise InputError(
                f"{{out}} '{folder}' holds a {old.get('job', {}).get('verb')} job with other "
                f"settings ({_diff(old.get('job', {}), job)}); resume with the same verb, "
                "model and options, or choose a new {out}", params=["out"])
        self.data = old or {"job": job, "created": _now(), "runs": [], "partitions": {}}

    def start_run(self, scheduler, todo: int) -> None:
        self.data["runs"].append({"started": _now(), "finished": None,
                                  "scheduler": scheduler, "partitions_to_do": todo,
                                  "versions": _versions(), "host": socket.gethostname()})
        self.save()

    def complete(self, name: str) -> bool:
        """True when partition output ``name`` is recorded and its file holds those rows
        (``out_rows`` when a verb writes another number of rows than it reads)."""
        entry = self.data["partitions"].get(name)
        f = self.path.parent / name
        if entry is None or not f.exists():
            return False
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(f).metadata.num_rows == entry.get("out_rows", entry["rows"])
        except Exception:
            return False

    def record(self, name: str, result: dict) -> None:
        self.data["partitions"][name] = {**result, "finished": _now(),
                                         "run": len(self.data["runs"])}
        self.save()

    def finish_run(self) -> None:
        self.data["runs"][-1]["finished"] = _now()
        self.save()

    def save(self) -> None:
        write_text(self.path, json.dumps(self.data, indent=2, default=str))


def _diff(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    diffs = [f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in keys
             if old.get(k) != new.get(k)]
    return "; ".join(diffs)[:300]


