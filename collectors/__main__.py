"""`python -m collectors`: the same entry point as `embedperf collect`."""

from __future__ import annotations

from collectors.cli import cli_main

raise SystemExit(cli_main())
