"""default.page.size below 500 and the server's refusal of a larger pagesize.

``BaseListCmd.getPageSize``: a pagesize above ``default.page.size`` (s_maxPageSize) throws
InvalidParameterValueException("Page size can't exceed max allowed page size value: N") (431);
``getPageSizeVal`` uses default.page.size when no pagesize is given. The server refuses, it does
not cap, so `cs`'s fetch_list (pagesize 500) fails on such a cloud.
"""

from __future__ import annotations

import pytest
from cs import CloudStackApiException

from simkit import small_spec


def _spec(page_size: int, workers: int) -> dict:
    raw = small_spec(cloud={"page_size_max": page_size})
    raw["clusters"][0]["workers"] = workers
    raw["hosts"] = [{"name": "kvm-1", "cpu": 1024, "memory": 4194304}]
    return raw


def test_a_pagesize_above_default_page_size_is_refused_with_its_value(sim_factory):
    handle = sim_factory(spec=_spec(100, 250))
    cs = handle.cs()
    for command in (cs.listVirtualMachines, cs.listVolumes):
        with pytest.raises(CloudStackApiException) as caught:
            command(page=1, pagesize=101)
        assert caught.value.response.status_code == 431
        assert caught.value.error["errortext"] == "Page size can't exceed max allowed page size value: 100"
    with pytest.raises(CloudStackApiException) as caught:
        cs.listVirtualMachines(fetch_list=True)  # cs asks for 500 a page
    assert caught.value.error["errortext"] == "Page size can't exceed max allowed page size value: 100"


def test_paging_with_the_limit_reads_everything_and_no_pagesize_means_the_limit(sim_factory):
    handle = sim_factory(spec=_spec(100, 250))
    cs = handle.cs()
    unpaged = cs.listVirtualMachines()
    assert unpaged["count"] == 253 and len(unpaged["virtualmachine"]) == 100
    listed = cs.listVirtualMachines(fetch_list=True, pagesize=100)
    assert len(listed) == 253 and len({vm["id"] for vm in listed}) == 253
    last = cs.listVirtualMachines(page=3, pagesize=100)
    assert last["count"] == 253 and len(last["virtualmachine"]) == 53
