"""Processes a command left behind, found by a marker in their environment.

A command's descendants are reparented to init when their parent dies, so the parent link cannot
find what an interrupted command left; the environment can: a test starts the command with a
marker variable of its own, which every process it starts inherits (and keeps, however deep)."""

from __future__ import annotations

import os
import time
import uuid

#: The variable a test sets; its value is unique per test.
MARKER_VAR = "KAFKA_CONTROLLER_LEFTOVER_MARKER"


def new_marker() -> str:
    return f"leftover-{uuid.uuid4().hex}"


def marked(marker: str) -> dict[int, str]:
    """Live processes whose environment (or command line) carries ``marker``: pid -> command line."""
    wanted = f"{MARKER_VAR}={marker}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # gone, or not ours to read
            continue
        if wanted in environ or marker.encode() in cmdline:
            found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:300]
    return found


def wait_none_marked(marker: str, timeout_s: float) -> dict[int, str]:
    """Poll until no process carries ``marker`` (zombies read as none: their environment is
    empty); what was still there at the deadline, or ``{}``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = marked(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
