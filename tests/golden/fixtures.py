"""Copy a golden run folder into a test's tmp_path (reports write into the run folder)."""

from __future__ import annotations

import shutil
from pathlib import Path

from embedperf.schema import RunFolder

GOLDEN_DIR = Path(__file__).resolve().parent


def golden_copy(name: str, tmp_path: Path) -> RunFolder:
    target = tmp_path / name
    shutil.copytree(GOLDEN_DIR / name, target)
    return RunFolder(target)
