"""A fleet under CloudStack's API rate limit: six clusters (tests/sim/examples/fleet.yml) rolled six at
once with one key - a domain admin of ROOT, whom the limit applies to (a root admin is exempt,
ApiRateLimitServiceImpl.checkAccess) - on a cloud limited to 25 calls a second (the sim's window is
``1 / time_scale`` simulated seconds: one real second). ``fleet_api_rate: 25`` gives each rollout its
share: every cluster is rolled, and the call log shows the account refused for less than a tenth of
the fleet's wall time."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import rate_limit_helpers as rl
import rollout_helpers as rh
import yaml
from helpers import ANSIBLE_PLAYBOOK, ROOT, running_sim

pytestmark = pytest.mark.timeout(1800)

FLEET_KEY = {"name": "fleetops", "domain": "ROOT", "role": "domainadmin", "apikey": "fleetops-key",
             "secretkey": "fleetops-secret"}
RATE = 25
NEW_OFFERING = "cks-medium"


def limited_spec(path: Path) -> Path:
    raw = yaml.safe_load((Path(ROOT) / "tests" / "sim" / "examples" / "fleet.yml").read_text(encoding="utf-8"))
    raw["accounts"] = list(raw.get("accounts") or []) + [FLEET_KEY]
    raw["cloud"] = dict(raw.get("cloud") or {}, api_throttling_max=RATE,
                        api_throttling_interval=1 / float(raw["time_scale"]))
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_six_clusters_six_at_once_under_25_calls_a_second_each_keep_to_their_share(tmp_path: Path) -> None:
    with running_sim(str(limited_spec(tmp_path / "fleet-limited.yml"))) as sim:
        names = [f"fleet-0{i}" for i in range(1, 7)]
        hosts = {name: {"cks_id": sim.cluster(name)["id"]} for name in names}
        inv = tmp_path / "inventory.yml"
        inv.write_text(yaml.safe_dump({"all": {"children": {"cks_clusters": {"hosts": hosts}}}}), encoding="utf-8")
        report_path = tmp_path / "fleet-report.json"
        variables = {"rollout_poll_interval": 0.2, "rollout_eviction_retry_interval": 0.3, "rollout_delete_emptydir_data": True,
                     "rollout_validate_interval": 1, "fleet_group": "cks_clusters", "fleet_node_offerings": {"worker": NEW_OFFERING},
                     "fleet_work_dir": str(tmp_path / "fleet"), "fleet_parallel": 6, "fleet_api_rate": RATE,
                     "fleet_report_path": str(report_path)}
        vars_path = tmp_path / "vars.json"
        vars_path.write_text(json.dumps(variables), encoding="utf-8")
        env = rh.playbook_env(sim, str(tmp_path))
        env.update(CLOUDSTACK_KEY=FLEET_KEY["apikey"], CLOUDSTACK_SECRET=FLEET_KEY["secretkey"])
        since = time.time()
        proc = subprocess.run([ANSIBLE_PLAYBOOK, "cloudstack.cks.fleet", "-i", str(inv), "-e", f"@{vars_path}", "--forks", "6"],
                              env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=1500, check=False)
        wall = time.time() - since
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-4000:]
        report = json.loads(report_path.read_text(encoding="utf-8"))
        assert {c["cluster"]: c["outcome"] for c in report["clusters"]} == {name: "rolled" for name in names}, output[-3000:]
        calls = [c for c in sim.calls(since) if c.get("api") == "cloudstack"]
        refused = rl.throttled_seconds(calls, account="fleetops")
        # Only the fleet's key is ever refused (the tests' reads use the root admin's, never limited).
        assert rl.throttled_calls(calls) == rl.throttled_calls(calls, account="fleetops")
        assert refused < wall / 10, (refused, wall, len(rl.throttled_calls(calls)), len(calls))
