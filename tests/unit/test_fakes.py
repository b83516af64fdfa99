# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The shared fakes, and the real clients, against the Protocols the rollout is written to."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from fakes import FakeCloudStack, FakeKube, FakeLock, FakeQuorumClient

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import CloudStackClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd_exec import EtcdExecClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._common import protocols
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import KubernetesError, LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._services.quorum import QuorumClient
from ansible_collections.cloudstack.cks.plugins.module_utils._state.record import Lock


def protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    found = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            if callable(value) and not name.startswith("_"):
                found[name] = inspect.signature(value)
    return found


def parameters(signature: inspect.Signature) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in signature.parameters.values() if p.name != "self"]


PAIRS = [
    (protocols.KubernetesApi, FakeKube), (protocols.KubernetesApi, KubeClient),
    (protocols.CloudStackApi, FakeCloudStack), (protocols.CloudStackApi, CloudStackClient),
    (protocols.RolloutLock, FakeLock), (protocols.RolloutLock, Lock),
    (QuorumClient, FakeQuorumClient), (QuorumClient, EtcdClient), (QuorumClient, EtcdExecClient),
]


@pytest.mark.parametrize(("protocol", "implementation"), PAIRS, ids=lambda x: x.__name__)
def test_provides_every_method_of_its_protocol_with_the_same_parameters(protocol: type, implementation: type) -> None:
    methods = protocol_methods(protocol)
    assert methods, f"{protocol.__name__} declares no methods"
    for name, wanted in methods.items():
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {protocol.__name__}.{name}"
        got = inspect.signature(getattr(implementation, name))
        assert parameters(got) == parameters(wanted), (
            f"{implementation.__name__}.{name}{got} does not match {protocol.__name__}.{name}{wanted}")


def test_the_check_catches_a_drifted_fake() -> None:
    class Drifted(FakeLock):
        def renew(self, force: bool) -> None:  # type: ignore[override]
            del force

    with pytest.raises(AssertionError, match="does not match"):
        test_provides_every_method_of_its_protocol_with_the_same_parameters(protocols.RolloutLock, Drifted)


def test_fake_kube_merge_patch_and_resource_versions() -> None:
    kube = FakeKube(nodes=[{"metadata": {"name": "n1", "labels": {"a": "1"}}, "spec": {}}])
    kube.patch_node("n1", {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"unschedulable": True}})
    assert kube.read_node("n1") == {"metadata": {"name": "n1", "labels": {"b": "2"}}, "spec": {"unschedulable": True}}
    with pytest.raises(KubernetesError) as missing:
        kube.read_node("n2")
    assert missing.value.status == 404
    first = kube.create_lease("kube-system", {"metadata": {"name": "l"}})
    with pytest.raises(KubernetesError) as stale:
        kube.replace_lease("kube-system", "l", {"metadata": {"name": "l", "resourceVersion": "0"}})
    assert stale.value.status == 409
    assert kube.replace_lease("kube-system", "l", first)["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]


def test_fake_lock_raises_once_lost() -> None:
    lock = FakeLock()
    lock.renew()
    lock.lose()
    with pytest.raises(LockHeld):
        lock.renew()
    assert lock.renewed == 1
