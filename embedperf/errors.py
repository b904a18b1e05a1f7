"""The one exception hierarchy. Every message says what happened and what the user can do."""

from __future__ import annotations

from pydantic import ValidationError


class EmbedperfError(Exception):
    """Base: caught by the CLI and printed as one line (exit code 2), never as a traceback."""

    exit_code = 2


class ConfigError(EmbedperfError):
    """A setting, scenario or flag is invalid."""


class RunFolderError(EmbedperfError):
    """A run folder is missing, incomplete or from an incompatible version."""


class DeviceError(EmbedperfError):
    """The requested device (npu, cuda) or its runtime is unavailable."""


class ModelLoadError(EmbedperfError):
    """The model directory cannot be found or loaded."""


class CollectorError(EmbedperfError):
    """A telemetry source cannot run."""


class TargetError(EmbedperfError):
    """The load target cannot be reached or answers wrongly."""


class GateFailed(EmbedperfError):
    """A comparison or precision gate failed (exit code 1, for CI pipelines)."""

    exit_code = 1


class GateInconclusive(EmbedperfError):
    """A comparison cannot give a verdict (steps too short, loads that differ): exit code 2, never a pass."""


def problems(exc: ValidationError, top: str = "(top level)") -> str:
    """A validation error's problems on one line: `dotted.field: message; ...` (`top`: a model-level one)."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or top}: {str(e['msg']).removeprefix('Value error, ')}"
        for e in exc.errors()
    )
