"""Regenerate the golden run folders beside this file: `.venv/bin/python tests/golden/make_golden.py`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from analysis.cli.synth import synthesize  # noqa: E402
from tests.golden.builders import known_percentiles  # noqa: E402

SYNTH_REQUESTS = 6000
SYNTH_HOURS = 0.04  # 144 s, four 36 s steps


def main() -> None:
    for name in ("known_percentiles", "compare_base", "compare_faster", "compare_same"):
        shutil.rmtree(HERE / name, ignore_errors=True)
    known_percentiles(HERE / "known_percentiles")
    synthesize(HERE / "compare_base", SYNTH_REQUESTS, n_devices=2, hours=SYNTH_HOURS, seed=11)
    # Known effect: latency x0.7 at the same users, so QPS x1/0.7 (Little's law).
    synthesize(
        HERE / "compare_faster", SYNTH_REQUESTS, n_devices=2, hours=SYNTH_HOURS, seed=12, latency_scale=0.7
    )
    # No effect: the same distributions, another seed.
    synthesize(HERE / "compare_same", SYNTH_REQUESTS, n_devices=2, hours=SYNTH_HOURS, seed=13)


if __name__ == "__main__":
    main()
