"""Lines a load process writes for whoever drives it (`embedperf run`, a test), each marking an event.

A driver waits for the line instead of sleeping for long enough. This module imports nothing (Locust least of
all: importing it monkey-patches the reader's process), so any driver can share the text."""

from __future__ import annotations

# Logged (INFO) once the process's SIGTERM handler is in place: from then on a SIGTERM stops the run and
# closes its folder (a master still waiting for its workers exits 2, nothing measured).
SIGTERM_READY_LOG = "embedperf: a SIGTERM now stops the run and closes the run folder"

# Printed (stdout) once the run folder exists; `embedperf run` reads the folder from the child's last one.
RUN_FOLDER_PREFIX = "run folder: "
