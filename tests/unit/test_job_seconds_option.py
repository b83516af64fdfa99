"""cks_node_cycle's job_seconds: what earlier batches' jobs took, handed to this batch's client."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.job_waits import JobTimes, JobWait
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import InvalidInput
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.job_polls import Bracket
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import give_job_seconds


class Cloud:
    def __init__(self) -> None:
        self.job_times = JobTimes()


def test_given_seconds_become_the_first_poll_of_each_command() -> None:
    cloud = Cloud()
    # An operator's number: ended by then, not before half of it; the role hands on [after, by].
    give_job_seconds(cloud, {"stopVirtualMachine": 11, "startVirtualMachine": [16.25, "16.5"]})
    assert cloud.job_times.bracket("stopVirtualMachine") == Bracket(5.5, 11.0)
    assert cloud.job_times.bracket("startVirtualMachine") == Bracket(16.25, 16.5)
    assert cloud.job_times.bracket("resizeVolume") is None
    # What this batch sees wins over what the earlier batches saw.
    cloud.job_times.record(JobWait("stopVirtualMachine", "j-1", "node-1", 1, 9.0), Bracket(8.5, 9.0))
    assert cloud.job_times.learned() == {"startVirtualMachine": [16.25, 16.5], "stopVirtualMachine": [8.5, 9.0]}
    assert cloud.job_times.report()["polls"] == 1
    # A job given up at the deadline teaches nothing.
    cloud.job_times.record(JobWait("stopVirtualMachine", "j-2", "node-2", 4, 30.0))
    assert cloud.job_times.bracket("stopVirtualMachine") == Bracket(8.5, 9.0)


@pytest.mark.parametrize("bad", [["stopVirtualMachine"], "11", {"startVirtualMachine": 3, "stopVirtualMachine": -1},
                                 {"stopVirtualMachine": "soon"}, {"stopVirtualMachine": [3, 2]},
                                 {"stopVirtualMachine": [1, 2, 3]}, {"stopVirtualMachine": True}])
def test_bad_job_seconds_name_the_option(bad: Any) -> None:
    cloud = Cloud()
    with pytest.raises(InvalidInput) as info:
        give_job_seconds(cloud, bad)
    assert info.value.parameter == "rollout.job_seconds"
    assert cloud.job_times.priors == {}


def test_nothing_given_changes_nothing() -> None:
    cloud = Cloud()
    give_job_seconds(cloud, None)
    give_job_seconds(cloud, {})
    assert cloud.job_times.priors == {}
