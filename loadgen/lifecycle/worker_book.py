"""The master's book of a distributed run's workers: rows each sent, when it was last heard, when it was
missing. A worker silent for MISSING_AFTER_S is gone; the run carries on, and the manifest names the seconds
each worker was missing, so a reader knows which share of the load was not sent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from embedperf.schema import GeneratorWorker, Manifest, StageRecord

MISSING_AFTER_S = 3.0  # three forward intervals without a batch, as Locust's own heartbeat liveness


@dataclass
class _Seen:
    worker: str
    first_unix_s: float
    last_unix_s: float
    rows: int = 0
    final: bool = False
    missing: list[list[float | None]] = field(default_factory=list)  # [from, to]; to None while missing
    open_loop: dict[str, float] = field(default_factory=dict)


class WorkerBook:
    """Keyed by Locust client id (what the master's runner knows); shows the worker's row-name."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def batch(
        self, client_id: str, worker: str, n_rows: int, now_unix_s: float, final: bool = False,
        open_loop: Mapping[str, float] | None = None,
    ) -> None:
        seen = self._seen.setdefault(client_id, _Seen(worker, now_unix_s, now_unix_s))
        if seen.missing and seen.missing[-1][1] is None:  # it came back
            seen.missing[-1][1] = now_unix_s
        seen.last_unix_s = now_unix_s
        seen.rows += n_rows
        if final:
            seen.final = True
            seen.open_loop = dict(open_loop or {})

    def lost(self, client_id: str, worker: str, since_unix_s: float) -> bool:
        """Book a worker Locust has lost as missing since its last batch (since `since_unix_s` when it sent
        none) unless it already is or has sent its final rows; whether it was newly booked."""
        seen = self._seen.get(client_id)
        if seen is None:
            self._seen[client_id] = _Seen(worker, since_unix_s, since_unix_s, missing=[[since_unix_s, None]])
            return True
        if seen.final or (seen.missing and seen.missing[-1][1] is None):
            return False
        seen.missing.append([seen.last_unix_s, None])
        return True

    def check(self, now_unix_s: float) -> list[str]:
        """Mark workers silent for MISSING_AFTER_S as missing since their last batch; returns the new ones."""
        gone = []
        for seen in self._seen.values():
            open_gap = bool(seen.missing) and seen.missing[-1][1] is None
            if not seen.final and not open_gap and now_unix_s - seen.last_unix_s > MISSING_AFTER_S:
                seen.missing.append([seen.last_unix_s, None])
                gone.append(seen.worker)
        return gone

    def finals(self) -> set[str]:
        """Client ids that sent their final batch."""
        return {cid for cid, seen in self._seen.items() if seen.final}

    def missing_now(self) -> set[str]:
        return {cid for cid, seen in self._seen.items() if seen.missing and seen.missing[-1][1] is None}

    def reset_finals(self) -> None:
        for seen in self._seen.values():
            seen.final = False

    def records(self, stages: list[StageRecord], end_unix_s: float) -> list[GeneratorWorker]:
        """Missing time counts inside the run's stages only (a worker gone during the drain missed no load)."""
        starts = [s.start_unix_s for s in stages]
        ends = [s.end_unix_s for s in stages if s.end_unix_s is not None]
        lo = min(starts) if starts else None
        hi = max(ends) if ends else end_unix_s
        out = []
        for seen in self._seen.values():
            gaps = [(float(a or 0.0), float(b if b is not None else end_unix_s)) for a, b in seen.missing]
            missing_s = sum(max(0.0, min(b, hi) - max(a, lo if lo is not None else a)) for a, b in gaps)
            out.append(GeneratorWorker(
                worker=seen.worker, rows=seen.rows, first_seen_unix_s=seen.first_unix_s,
                last_seen_unix_s=seen.last_unix_s, final_rows=seen.final, missing_s=round(missing_s, 3),
                missing=gaps,
            ))
        return sorted(out, key=lambda w: w.worker)

    def finish(self, manifest: Manifest, end_unix_s: float) -> None:
        """Write the workers, a note per missing worker and the summed open-loop counters into the manifest."""
        manifest.workers = self.records(manifest.stages, end_unix_s)
        start = manifest.stages[0].start_unix_s if manifest.stages else manifest.start_unix_s or 0.0
        for w in manifest.workers:
            if w.missing_s > 0:
                since_s = max(0.0, w.missing[0][0] - start)
                manifest.notes.append(
                    f"worker {w.worker} was missing for {w.missing_s:.1f} s of the run (silent from "
                    f"{since_s:.1f} s into the first stage); its share of the load was not sent then"
                )
        totals = sum_counters(seen.open_loop for seen in self._seen.values())
        if totals:
            manifest.open_loop = totals  # type: ignore[attr-defined]  # the local run's extra key, summed


def sum_counters(counters: Iterable[Mapping[str, float]]) -> dict[str, Any]:
    """Open-loop counters of every dispatcher: counts add up, the worst lag is the maximum."""
    total: dict[str, Any] = {}
    for c in counters:
        for key, value in c.items():
            total[key] = (max(total.get(key, 0.0), value) if key.startswith("max_") else total.get(key, 0) + value)
    return total
