"""NodeSettingsService's decisions: what is written, in what order, and what is given back on failure.

The record and the lock are the real ``record.py`` classes over a small in-memory stand-in of the
four Kubernetes object calls they use (with resourceVersion compare-and-set), so the service's
ordering and failure handling are tested without a cluster; the integration tests do the same
through the real clients against cks-sim.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import pytest

from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as records
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.request import SettingsRequest
from ansible_collections.cloudstack.cks.plugins.module_utils._services.settings import NodeSettingsService
from ansible_collections.cloudstack.cks.plugins.module_utils._state.settings_store import stored_max_unavailable, stored_settings
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError, InvalidInput, KubernetesError, LockHeld

from factories import ClusterFactory, so


class ObjectStore:
    """ConfigMaps and Leases with resourceVersion, as the API server keeps them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version = 100
        self.writes: list[tuple[str, str]] = []
        self.fail_next: dict[str, int] = {}
        self.before_write: Optional[Callable[[str], None]] = None

    def _get(self, kind: str, ns: str, name: str) -> Optional[dict[str, Any]]:
        found = self.objects.get((kind, ns, name))
        return copy.deepcopy(found) if found else None

    def _put(self, verb: str, kind: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook(kind)
        if self.fail_next.get(f"{verb} {kind}", 0) > 0:
            self.fail_next[f"{verb} {kind}"] -= 1
            raise KubernetesError(f"{verb} {kind}", "etcdserver: request timed out", status=500)
        name = body["metadata"]["name"]
        current = self.objects.get((kind, ns, name))
        if verb == "create" and current is not None:
            raise KubernetesError(f"create {kind}", "already exists", status=409)
        if verb == "replace":
            if current is None:
                raise KubernetesError(f"replace {kind}", "not found", status=404)
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise KubernetesError(f"replace {kind}", "the object has been modified", status=409)
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[(kind, ns, name)] = stored
        self.writes.append((verb, kind))
        return copy.deepcopy(stored)

    # the KubeClient calls record.py uses
    def get_configmap(self, ns: str, name: str) -> Optional[dict[str, Any]]:
        return self._get("configmap", ns, name)

    def create_configmap(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put("create", "configmap", ns, body)

    def replace_configmap(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put("replace", "configmap", ns, body)

    def get_lease(self, ns: str, name: str) -> Optional[dict[str, Any]]:
        return self._get("lease", ns, name)

    def create_lease(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put("create", "lease", ns, body)

    def replace_lease(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._put("replace", "lease", ns, body)

    def patch_lease(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of the spec on the version it names (409 otherwise), stored as a replace."""
        current = self._get("lease", ns, name)
        if current is None:
            raise KubernetesError("patch lease", "not found", status=404)
        merged = dict(current, spec={**current.get("spec", {}), **patch.get("spec", {})})
        merged["metadata"] = dict(current["metadata"], resourceVersion=patch["metadata"]["resourceVersion"])
        return self._put("replace", "lease", ns, merged)


def service(kube: ObjectStore, factory: Optional[ClusterFactory] = None, check_mode: bool = False,
            diff: bool = False) -> NodeSettingsService:
    view = (factory or ClusterFactory(control=3, workers=4)).view()
    return NodeSettingsService(
        view, records.RecordStore(kube),
        lambda holder, seconds: records.Lock(kube, holder_identity=holder, duration_seconds=seconds or 600),
        check_mode=check_mode, diff=diff)


def request(**kw: Any) -> SettingsRequest:
    return SettingsRequest(**kw)


def stored(kube: ObjectStore) -> Optional[records.Record]:
    return records.RecordStore(kube).read()


def test_storing_writes_the_record_only() -> None:
    kube = ObjectStore()
    result = service(kube).run(request(offerings={"worker": "cks-large"}))
    assert result["changed"] and kube.writes == [("create", "configmap")]
    assert stored_settings(stored(kube)).worker.offering_id == so("large")
    assert result["workernodesoutofdate"] == 4


def test_refused_settings_write_nothing() -> None:
    kube = ObjectStore()
    with pytest.raises(InvalidInput, match="node_root_disk_sizes.worker=10"):
        service(kube).run(request(root_disk_sizes={"worker": 10}, rollout=True, lock_holder="run-1"))
    assert kube.writes == []


@pytest.mark.parametrize("state", ["Scaling", "ScalingStoppedCluster", "Destroying", "Upgrading"])
def test_nothing_is_read_or_written_during_a_cks_operation(state: str) -> None:
    kube = ObjectStore()
    with pytest.raises(CksError, match=f"is {state}"):
        service(kube, ClusterFactory(state=state)).run(request(offerings={"worker": "cks-large"}))
    assert kube.writes == []


def test_a_held_lock_refuses_storing_and_check_mode_alike() -> None:
    kube = ObjectStore()
    records.Lock(kube, holder_identity="other").acquire()
    for check in (False, True):
        with pytest.raises(LockHeld, match="other"):
            service(kube, check_mode=check).run(request(offerings={"worker": "cks-large"}))
    assert kube.writes == [("create", "lease")]


def test_rollout_takes_the_lock_before_it_stores() -> None:
    kube = ObjectStore()
    result = service(kube).run(request(offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1"))
    assert kube.writes == [("create", "lease"), ("create", "configmap")]
    assert result["lock"]["holder"] == "run-1" and result["lock"]["held"]


def test_check_mode_writes_nothing_and_still_reports_the_change() -> None:
    kube = ObjectStore()
    result = service(kube, check_mode=True, diff=True).run(
        request(offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1"))
    assert result["changed"] and kube.writes == []
    assert result["diff"]["after"]["worker"]["offering"] == "cks-large"
    assert result["diff"]["before"]["worker"]["offering"] == "cks-medium"


def test_a_failed_store_releases_the_lock_and_keeps_the_error() -> None:
    kube = ObjectStore()
    kube.fail_next["create configmap"] = 1
    with pytest.raises(CksError, match="storing the node settings failed.*the lock was released"):
        service(kube).run(request(offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1"))
    lock = records.Lock(kube).read()
    assert lock is not None and not lock.held
    record = stored(kube)
    assert record is not None and "storing the node settings failed" in record.last_error
    assert stored_settings(record) is None


def test_a_failed_store_keeps_a_lock_this_run_held_before() -> None:
    kube = ObjectStore()
    records.Lock(kube, holder_identity="run-1").acquire()
    # Not refused: the lock is this same run's.
    service(kube).run(request(offerings={"worker": "cks-large"}, lock_holder="run-1"))
    kube.fail_next["replace configmap"] = 1
    with pytest.raises(CksError, match="the lock was kept"):
        service(kube).run(request(offerings={"worker": "cks-xlarge"}, rollout=True, lock_holder="run-1"))
    assert records.Lock(kube).read().holder == "run-1"


def test_a_stale_cancel_is_cleared_and_a_fresh_one_kept() -> None:
    kube = ObjectStore()
    store = records.RecordStore(kube)
    store.set_cancel()  # left from an earlier rollout
    service(kube).run(request(offerings={"worker": "cks-large"}, rollout=True, lock_holder="run-1"))
    assert stored(kube).cancel is False

    records.Lock(kube, holder_identity="run-1").release()
    # A cancel that comes in while the settings are being stored (after the lock was taken) stays.
    kube.before_write = lambda kind: None
    original = kube.replace_configmap

    def cancel_first(ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        kube.replace_configmap = original  # type: ignore[method-assign]
        store.set_cancel()
        return original(ns, name, body)

    kube.replace_configmap = cancel_first  # type: ignore[method-assign]
    result = service(kube).run(request(offerings={"worker": "cks-xlarge"}, rollout=True, lock_holder="run-2"))
    record = stored(kube)
    assert record.cancel is True and result["cancel_requested"] is True
    assert stored_settings(record).worker.offering_id == so("xlarge")


def test_settings_changed_by_someone_else_meanwhile_are_not_overwritten() -> None:
    kube = ObjectStore()
    service(kube).run(request(offerings={"worker": "cks-large"}))
    original = kube.replace_configmap
    other = service(kube)

    def someone_else_first(ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        kube.replace_configmap = original  # type: ignore[method-assign]
        records.RecordStore(kube).update(lambda r: r.settings["worker"].update(root_disk_gb=99))
        return original(ns, name, body)

    kube.replace_configmap = someone_else_first  # type: ignore[method-assign]
    with pytest.raises(CksError, match="changed by someone else"):
        other.run(request(offerings={"worker": "cks-xlarge"}))
    assert stored_settings(stored(kube)).worker.root_disk_gb == 99


def test_cancel_only_while_a_rollout_holds_the_lock() -> None:
    kube = ObjectStore()
    assert service(kube).run(request(cancel_rollout=True))["changed"] is False
    assert kube.writes == []
    records.Lock(kube, holder_identity="run-1").acquire()
    assert service(kube, check_mode=True).run(request(cancel_rollout=True))["changed"] is True
    assert stored(kube) is None
    result = service(kube).run(request(cancel_rollout=True))
    assert result["changed"] and stored(kube).cancel is True
    assert service(kube).run(request(cancel_rollout=True))["changed"] is False


def test_a_cancel_for_one_holder_leaves_another_holders_rollout_alone() -> None:
    kube = ObjectStore()
    records.Lock(kube, holder_identity="awx-job-100").acquire()
    result = service(kube).run(request(cancel_rollout=True, lock_holder="awx-job-200"))
    assert result["changed"] is False and result["cancel_requested"] is False
    assert "held by awx-job-100, not by awx-job-200" in result["msg"]
    assert stored(kube) is None
    result = service(kube).run(request(cancel_rollout=True, lock_holder="awx-job-100"))
    assert result["changed"] and stored(kube).cancel is True


def test_max_unavailable_with_rollout_false_is_refused_and_nothing_is_stored() -> None:
    kube = ObjectStore()
    with pytest.raises(InvalidInput, match="max_unavailable=3: is used only with rollout=true"):
        service(kube).run(request(max_unavailable=3))
    assert stored(kube) is None


def test_max_unavailable_is_kept_where_plan_settings_readers_ignore_it() -> None:
    kube = ObjectStore()
    service(kube).run(request(max_unavailable=3, rollout=True, lock_holder="run-1"))
    record = stored(kube)
    assert stored_max_unavailable(record) == 3
    # Anyone reading the record's settings with plan.Settings.from_dict still can.
    from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.settings import Settings
    assert Settings.from_dict(record.settings).worker.offering_id == so("medium")
