"""Make `locust -f locustfiles/<kind>.py --help` list embedperf's options.

Locust answers --help before it imports the locustfile, so the options a locustfile registers
never reach its help text (locust issue #2917). `make setup` writes a one-line .pth file into the
virtual environment that imports this module when the interpreter starts; it returns at once
unless the command is `locust ... --help` naming one of our locustfiles, and then registers the
same options the locustfile would (loadgen.wiring.plugin.install is idempotent).
"""

from __future__ import annotations

import sys
from pathlib import Path

LOCUSTFILES_DIR = Path(__file__).resolve().parents[2] / "locustfiles"
PTH_NAME = "embedperf-locust-help.pth"
PTH_LINE = "import loadgen.cli.locust_help; loadgen.cli.locust_help.activate()\n"
HELP_FLAGS = ("-h", "--help")


def locustfile_argument(args: list[str]) -> str | None:
    """The value of -f/--locustfile in a command line, in any of argparse's spellings."""
    for i, arg in enumerate(args):
        if arg in ("-f", "--locustfile") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--locustfile="):
            return arg.split("=", 1)[1]
        if arg.startswith("-f") and len(arg) > 2:
            return arg[2:].lstrip("=")
    return None


def our_locustfile(argv: list[str]) -> Path | None:
    """The embedperf locustfile a `locust --help` command names, else None."""
    if not argv or Path(argv[0]).name not in ("locust", "locust.exe"):
        return None
    if not any(arg in HELP_FLAGS for arg in argv[1:]):
        return None
    value = locustfile_argument(argv[1:])
    if value is None:
        return None
    path = Path(value).resolve()
    return path if path.parent == LOCUSTFILES_DIR and path.is_file() else None


def activate() -> None:
    """Called from the .pth line at interpreter start; costs one look at sys.argv otherwise."""
    path = our_locustfile(list(getattr(sys, "argv", []) or []))
    if path is None:
        return
    from loadgen.wiring.plugin import install  # Locust loads only for `locust -f <ours> --help`

    install(default_scenario=path.stem)


def write_pth(site_packages: Path) -> Path:
    """Write the .pth line into a site-packages folder (`python -m loadgen.cli.locust_help`)."""
    target = site_packages / PTH_NAME
    target.write_text(PTH_LINE, encoding="utf-8")
    return target


if __name__ == "__main__":
    import sysconfig

    print(write_pth(Path(sysconfig.get_paths()["purelib"])))
