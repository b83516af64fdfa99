"""``make sim-diff-record``: run the integration suite's rollouts with the sim recording every
Kubernetes request (``CKS_SIM_KUBE_RECORD``), and reduce the recording to ``recorded.json``: each
request kind the collection (and kubectl, in those tests) made, how often, its statuses and a body
shape. ``make sim-diff`` fails on a recorded kind the replay does not make.

    .venv/bin/python -m sim_diff.record     (cwd tests)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .kinds import recorded_kinds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RECORDED = os.path.join(HERE, "recorded.json")
# Rollouts of every shape the collection has: the kube calls of a node cycle, a whole rollout,
# its Events (and kubectl reading them), a dry run, a resumed run, the etcd checks through pods.
TESTS = (
    "tests/integration/test_rollout_calls.py",
    "tests/integration/test_node_cycle_kube_calls.py",
    "tests/integration/test_rollout_events.py",
    "tests/integration/test_rollout_dry_run.py",
    "tests/integration/test_rollout_resume.py",
    "tests/integration/test_etcd_pod.py",
    "tests/integration/test_cks_etcd_quorum_exec.py",
)


def main() -> int:
    out = os.path.join(ROOT, "out", "sim-diff")
    os.makedirs(out, exist_ok=True)
    recording = os.path.join(out, "recording.jsonl")
    if os.path.exists(recording):
        os.remove(recording)
    env = dict(os.environ, CKS_SIM_KUBE_RECORD=recording)
    code = subprocess.call([os.path.join(ROOT, ".venv", "bin", "python"), "-m", "pytest", "-q", "-n", "2",
                            "--dist", "loadfile", *TESTS], cwd=ROOT, env=env)
    if code != 0:
        print(f"sim-diff-record: the tests failed ({code}); recorded.json left as it was", file=sys.stderr)
        return code
    with open(recording, encoding="utf-8") as handle:
        kinds = recorded_kinds(handle)
    with open(RECORDED, "w", encoding="utf-8") as handle:
        json.dump({"tests": list(TESTS), "kinds": kinds}, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"sim-diff-record: {len(kinds)} kinds in {RECORDED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
