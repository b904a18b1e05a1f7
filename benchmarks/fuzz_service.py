"""`make fuzz`: schemathesis against the reference service's /openapi.json, bounded in examples and time.

Starts the service on a free loopback port (ServiceProcess), runs positive and negative generation over
every operation with the `not_a_server_error` check, and exits with schemathesis's status (0: no 5xx). The
OpenAPI document names the served model, so positive bodies are computed, not only validated.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from loadgen.processes.service_proc import ServiceProcess


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--max-examples", type=int, default=200, help="examples per operation (default 200)")
    parser.add_argument("--max-time-s", type=int, default=240, help="time budget of the run (default 240)")
    parser.add_argument("--seed", type=int, default=1, help="generation seed, for reproducible runs")
    parser.add_argument(
        "--deadline-ms",
        type=int,
        default=120_000,
        help="the service's --deadline-ms (default 120000): the fuzzer looks for answers bad input must never "
        "get, and the largest legal request (2,048 inputs) can outlast the 5 s default on a small CPU",
    )
    args = parser.parse_args(argv)
    schemathesis = Path(sys.executable).with_name("schemathesis")
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "service.log"
        with ServiceProcess(["--deadline-ms", str(args.deadline_ms)], log_path=log_path) as service:
            cmd = [
                str(schemathesis),
                "run",
                f"{service.url}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--mode",
                "all",
                "--max-examples",
                str(args.max_examples),
                "--max-time",
                str(args.max_time_s),
                "--seed",
                str(args.seed),
                "--request-timeout",
                "60",
                "--suppress-health-check",
                "all",
            ]
            print("$", " ".join(cmd), flush=True)
            # run from the temporary folder: schemathesis keeps its cache in the working directory
            rc = subprocess.run(cmd, timeout=args.max_time_s + 120, cwd=tmp).returncode
        if rc != 0 and log_path.is_file():
            print(f"service log tail:\n{log_path.read_text(errors='replace')[-3000:]}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
