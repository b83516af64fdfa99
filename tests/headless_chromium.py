"""Debian's Chromium, headless, as the tests open a page an operator opens (the docsite, the rollout's
timeline picture) and read back the DOM it built (``--dump-dom``, after the page's scripts ran)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

# Chromium in a closed network: without these it waits on the sandbox, the GPU, QUIC and the
# background services (component updates, sync) it would fetch, and a used profile brings state.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium on PATH: `make chromium-installed` installs Debian's chromium")
    return found


def dump_dom(uri: str) -> subprocess.CompletedProcess:
    """Chromium's run on ``uri`` with a fresh profile; its stdout is the DOM it built."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", uri],
                              capture_output=True, text=True, timeout=120, check=False)
