"""`python -m service`: the same entry point as `embedperf serve`."""

from __future__ import annotations

from service.cli import main

raise SystemExit(main())
