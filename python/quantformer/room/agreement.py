"""Agreement on the coding room's overlap: the two human coders with the most documents in
common, and each human coder against each machine coder, as Krippendorff's alpha and Cohen's
kappa with bootstrap intervals (:func:`quantformer.room.progress.pair_agreement`), computed
once per state of the overlap, in a thread of its own for the server. A mixin of
:class:`quantformer.room.loop.Room` (it reads the room's ``handled``, ``machine`` and
``lock``)."""

from __future__ import annotations

import threading

import pandas as pd

from .progress import pair_agreement


class Agreement:
    """The agreement methods of :class:`~quantformer.room.loop.Room`."""

    def overlap_pairs(self) -> tuple[list[str], list[tuple]]:
        """The two coders with the most documents in common and their codes of those
        documents, sorted by doc_id (a dictionary walk: cheap)."""
        with self.lock:
            pairs = [(doc, {c: lab for c, (s, lab) in by.items() if s == "code"})
                     for doc, by in self.handled.items()]
        pairs = sorted((d, p) for d, p in pairs if len(p) >= 2)
        if not pairs:
            return [], []
        counts = pd.Series([tuple(sorted(p)[:2]) for _, p in pairs]).value_counts()
        a, b = counts.index[0]
        return [a, b], [(d, p[a], p[b]) for d, p in pairs if a in p and b in p]

    def machine_pairs(self) -> list[tuple[str, str, tuple]]:
        """(human coder, machine coder, ((doc_id, human's code, machine's code), ...)) for
        every human coder and machine coder with a document both coded, sorted by names and
        doc_id (a dictionary walk: cheap). Every human code is blind to the machine's: a
        machine coder's codes are never shown on the page."""
        with self.lock:
            rows = sorted((h, m, doc, lab, self.machine[doc][m])
                          for doc, by in self.handled.items() if doc in self.machine
                          for h, (s, lab) in by.items() if s == "code"
                          for m in self.machine[doc])
        pairs: dict[tuple[str, str], list] = {}
        for h, m, doc, lab, bot in rows:
            pairs.setdefault((h, m), []).append((doc, lab, bot))
        return [(h, m, tuple(both)) for (h, m), both in pairs.items()]

    def agreement(self, n_boot: int = 500, wait: bool = True) -> dict:
        """Krippendorff's alpha and Cohen's kappa (bootstrap intervals) between the two
        human coders with the most documents in common, on the documents both coded; and
        in ``machine``, the same between each human coder and each machine coder on the
        documents both coded (with ``coder`` and ``machine`` naming them).

        Computed once per state of the overlap (the bootstrap takes most of a second): the
        same codes give the cached result. ``wait=False`` (the server) never waits for a
        computation: a changed overlap starts one in a thread and the last result comes
        back with ``"updating": True`` (the page asks again)."""
        coders, both = self.overlap_pairs()
        key = (tuple(coders), tuple(both), n_boot, tuple(self.machine_pairs()))
        with self.lock:
            cached, running = getattr(self, "agreed", None), getattr(self, "agreeing", None)
            if cached is not None and cached[0] == key:
                return cached[1]
            if not wait:
                if running is None or not running.is_alive():
                    self.agreeing = threading.Thread(target=self._agree, args=(key,),
                                                     daemon=True)
                    self.agreeing.start()
                last = cached[1] if cached is not None else {"n": 0, "coders": [],
                                                             "machine": []}
                return {**last, "updating": True}
        return self._agree(key)

    def _agree(self, key: tuple) -> dict:
        coders, both, n_boot, machine = key
        result = pair_agreement(coders, both, n_boot)
        result["machine"] = [{**pair_agreement([h, m], pairs, n_boot), "coder": h,
                              "machine": m} for h, m, pairs in machine]
        with self.lock:
            self.agreed = (key, result)
        return result
