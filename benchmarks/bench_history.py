"""`make bench-history`: does `embedperf history` flag a real slowdown and only that?

Five short runs of the smoke scenario against the reference service (its defaults), then `embedperf history`
over their folder (expected exit 0); a sixth, unchanged run (expected exit 0); then a seventh against the same
service started slower (batching off, one worker on one thread: every request computed alone) (expected exit
1). Each step is held long enough for an interval on its P99. Printed: each verdict with history's own lines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from loadgen.processes.service_proc import ServiceProcess

REPO_ROOT = Path(__file__).resolve().parents[1]
SLOWER = ["--no-batching", "--workers", "1", "--threads", "1"]


def smoke_run(url: str, runs_dir: Path, label: str, step_s: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "embedperf.cli", "run", "smoke", "--host", url, "--runs-dir", str(runs_dir),
         "--label", label, "--step-duration-s", str(step_s), "--warmup-s", "1", "--no-collectors"],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    )  # fmt: skip


def history(runs_dir: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "embedperf.cli", "history", str(runs_dir)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--step-s", type=int, default=8, help="seconds per smoke step")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="embedperf-bench-history-") as tmp:
        runs = Path(tmp) / "runs"
        with ServiceProcess([], log_path=Path(tmp) / "service.log") as service:
            for index in range(6):
                smoke_run(service.url, runs, f"same-{index}", args.step_s)
                if index == 4:
                    code, text = history(runs)
                    print(f"five runs: exit {code} (expected 0)\n{text}\n", flush=True)
            code, text = history(runs)
            print(f"a sixth run, unchanged: exit {code} (expected 0)\n{text}\n", flush=True)
        with ServiceProcess(SLOWER, log_path=Path(tmp) / "slower.log") as service:
            smoke_run(service.url, runs, "slower", args.step_s)
        code, text = history(runs)
        print(f"a run against the service slowed down ({' '.join(SLOWER)}): exit {code} (expected 1)\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
