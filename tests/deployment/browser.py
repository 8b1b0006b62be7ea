"""Headless Chromium (Debian's ``chromium``) as a person's eyes: the text a page shows once its
scripts have run, and screenshots kept next to the test's files."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("no Chromium on PATH: .ci/bootstrap installs Debian's chromium")


class Browser:
    def __init__(self, work: Path) -> None:
        self.binary = chromium()
        self.work = work
        self.profile = work / "chromium-profile"

    def _run(self, *args: str, timeout_s: float = 90.0) -> str:
        done = subprocess.run(
            [
                self.binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={self.profile}",
                "--window-size=1400,1000",
                *args,
            ],
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return done.stdout.decode(errors="replace")

    def dom(self, url: str, budget_ms: int = 15_000) -> str:
        """The page's DOM after its scripts ran (``--virtual-time-budget`` lets them settle)."""
        return self._run(f"--virtual-time-budget={budget_ms}", "--dump-dom", url)

    def text(self, url: str, *, wait_for: str, timeout_s: float = 90.0) -> str:
        """The visible text of ``url`` once it contains ``wait_for`` (a single-page app renders late)."""
        deadline = time.monotonic() + timeout_s
        while True:
            dom = self.dom(url)
            text = visible_text(dom)
            if wait_for in text:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} never showed {wait_for!r}; it showed: {text[:1500]!r}")
            time.sleep(1.0)

    def screenshot(self, url: str, name: str) -> Path:
        path = self.work / name
        self._run("--virtual-time-budget=15000", f"--screenshot={path}", url)
        return path


def visible_text(dom: str) -> str:
    body = re.sub(r"(?is)<(script|style|noscript)\b.*?</\1>", " ", dom)
    body = re.sub(r"(?s)<[^>]+>", " ", body)
    return re.sub(r"\s+", " ", html.unescape(body)).strip()
