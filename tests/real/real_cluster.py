"""What the real tier's test modules share: kubectl against a sim's cluster, and the release
tests/kube-plane pins (what ``kubectl version`` must name)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Optional

from in_process_sims import RolloutSim

KUBECTL = shutil.which("kubectl") or "kubectl"
GO_MOD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kube-plane", "go.mod")


def kubectl(sim: RolloutSim, *args: str, kubeconfig: Optional[str] = None) -> str:
    """kubectl against the sim's first cluster, or the one ``kubeconfig`` names."""
    out = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig or sim.env["kubeconfig"], *args], capture_output=True,
                         text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def pinned_release() -> str:
    with open(GO_MOD, encoding="utf-8") as handle:
        found = re.search(r"^\s*k8s\.io/kubernetes (v[0-9.]+)$", handle.read(), re.M)
    assert found, GO_MOD
    return found.group(1)
