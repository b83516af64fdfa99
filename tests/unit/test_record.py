"""MicroTime, the record's ConfigMap shape, and the lock's decisions (expiry, takeover, release).

The lock and the record against a real API server's compare-and-set are in
tests/integration/test_clients_kube.py; here an in-memory store with the same resourceVersion
rules stands in, so the decisions can be tested at exact times.
"""

from __future__ import annotations

import socket
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest
from clock import FakeClock
from fakes import FakeKube

from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import LockHeld
from ansible_collections.cloudstack.cks.plugins.module_utils._state import record as rec
from ansible_collections.cloudstack.cks.plugins.module_utils._state.held import held_lock

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_microtime_has_six_digits_and_z_even_at_whole_seconds() -> None:
    assert rec.format_microtime(T0) == "2026-12-01T12:00:00.000000Z"
    assert rec.format_microtime(T0.replace(microsecond=42)) == "2026-12-01T12:00:00.000042Z"
    plus2 = T0.astimezone(timezone(timedelta(hours=2)))
    assert rec.format_microtime(plus2) == "2026-12-01T12:00:00.000000Z"
    with pytest.raises(ValueError):
        rec.format_microtime(datetime(2026, 1, 1))


@pytest.mark.parametrize("text", ["2026-12-01T12:00:00Z", "2026-12-01T12:00:00.000000Z", "2026-12-01T12:00:00.0Z",
                                  "2026-12-01T14:00:00+02:00", "2026-12-01T14:00:00.000000000+0200"])
def test_parse_microtime_accepts_what_servers_write(text: str) -> None:
    assert rec.parse_microtime(text) == T0


def test_parse_microtime_refuses_garbage() -> None:
    with pytest.raises(ValueError):
        rec.parse_microtime("yesterday")


def test_record_round_trips_through_configmap_data() -> None:
    record = rec.Record(settings={"worker": {"offering": "cks-large"}}, cancel=True, last_error="node x: drain failed",
                        outcome="Alert", previous_holder_stopped={"holder": "h", "renew_time": "t"})
    data = record.to_data()
    assert all(isinstance(v, str) for v in data.values())
    assert data["cancel"] == "true" and data["lastError"] == "node x: drain failed"
    back = rec.Record.from_configmap({"metadata": {"resourceVersion": "9"}, "data": data})
    assert back == rec.Record(**{**record.__dict__, "resource_version": "9"})
    empty = rec.Record.from_configmap({"metadata": {}, "data": rec.Record().to_data()})
    assert (empty.last_error, empty.outcome, empty.cancel, empty.previous_holder_stopped) == (None, None, False, None)


def lock(kube: FakeKube, clock: FakeClock, holder: str, duration: int = 60) -> rec.Lock:
    return rec.Lock(kube, holder_identity=holder, duration_seconds=duration, clock_skew_seconds=5, clock=clock)


def test_lock_acquire_writes_a_valid_lease() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    info = lock(kube, clock, "run-a").acquire()
    spec = kube.objects[("lease", rec.LOCK_NAME)]["spec"]
    assert spec == {"holderIdentity": "run-a", "leaseDurationSeconds": 60, "acquireTime": "2026-12-01T12:00:00.000000Z",
                    "renewTime": "2026-12-01T12:00:00.000000Z", "leaseTransitions": 0}
    assert info.held and info.taken_over_from is None


def test_same_holder_reacquires_and_keeps_acquire_time() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    lock(kube, clock, "run-a").acquire()
    clock.now += timedelta(seconds=30)
    info = lock(kube, clock, "run-a").acquire()  # a later task of the same run, a new process
    assert info.acquire_time == "2026-12-01T12:00:00.000000Z" and info.renew_time == "2026-12-01T12:00:30.000000Z"


def test_another_holder_is_refused_until_duration_plus_skew() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    lock(kube, clock, "run-a").acquire()
    clock.now += timedelta(seconds=64)
    with pytest.raises(LockHeld) as info:
        lock(kube, clock, "run-b").acquire()
    assert "run-a" in info.value.msg and "2026-12-01T12:00:00.000000Z" in info.value.msg
    assert info.value.details["holder"] == "run-a"
    clock.now += timedelta(seconds=2)  # 66 s > 60 + 5
    taken = lock(kube, clock, "run-b").acquire()
    assert taken.holder == "run-b" and taken.transitions == 1
    stopped = dict(taken.taken_over_from or {})
    assert {key: stopped.pop(key) for key in ("holder", "renew_time", "acquire_time", "noticed")} == {
        "holder": "run-a", "renew_time": "2026-12-01T12:00:00.000000Z", "acquire_time": "2026-12-01T12:00:00.000000Z",
        "noticed": "2026-12-01T12:01:06.000000Z"}
    # Who it was: the controller run-a recorded in the lease (this host; no ansible-playbook above a test).
    assert stopped["controller"]["host"] == socket.gethostname() and stopped["gone"] is None


def test_renew_after_takeover_is_lock_lost() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    a.acquire()
    clock.now += timedelta(seconds=120)
    lock(kube, clock, "run-b").acquire()
    with pytest.raises(rec.LockLost, match="run-b"):
        a.renew()


def test_renew_loses_to_a_concurrent_write() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    a.acquire()
    real_get = kube.get_lease

    def get_then_someone_writes(ns: str, name: str) -> Optional[dict[str, Any]]:
        lease = real_get(ns, name)
        kube._store("lease", name, kube.objects[("lease", name)])  # bumps resourceVersion
        return lease

    kube.get_lease = get_then_someone_writes  # type: ignore[method-assign]
    # Written since our last write (the patch gets 409), and again between the read and the replace.
    kube._store("lease", rec.LOCK_NAME, kube.objects[("lease", rec.LOCK_NAME)])
    with pytest.raises(rec.LockLost, match="409"):
        a.renew()


def _counting_reads(kube: FakeKube) -> list[str]:
    reads: list[str] = []
    real_get = kube.get_lease

    def get(ns: str, name: str) -> Optional[dict[str, Any]]:
        reads.append(name)
        return real_get(ns, name)

    kube.get_lease = get  # type: ignore[method-assign]
    return reads


def test_a_renewal_after_our_own_write_is_one_conditional_patch() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    first = a.acquire()
    reads = _counting_reads(kube)
    clock.now += timedelta(seconds=20)
    renewed = a.renew()
    assert reads == [] and kube.lease_patches == 1
    assert renewed.renew_time == "2026-12-01T12:00:20.000000Z" and renewed.acquire_time == first.acquire_time
    assert renewed.resource_version != first.resource_version and a.written_version == renewed.resource_version
    spec = kube.objects[("lease", rec.LOCK_NAME)]["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("run-a", 60, 0)


def test_the_next_module_run_renews_from_the_version_handed_on_without_a_read() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    version = lock(kube, clock, "run-a", duration=90).acquire().resource_version
    reads = _counting_reads(kube)
    later = held_lock(kube, "run-a", version)
    assert later is not None
    info = later.renew_at_batch_start()
    assert reads == [] and kube.lease_patches == 1 and info.holder == "run-a"
    # Its duration was not read up front: the answer gives it, and the renewer paces by it.
    assert later.duration_seconds == 90


def test_a_lease_written_since_is_read_and_judged_still_ours() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    version = lock(kube, clock, "run-a", duration=90).acquire().resource_version
    # Someone wrote the lease since (a label, say) but left our holder: renewed after a read.
    kube._store("lease", rec.LOCK_NAME, kube.objects[("lease", rec.LOCK_NAME)])
    reads = _counting_reads(kube)
    later = held_lock(kube, "run-a", version)
    assert later is not None
    info = later.renew_at_batch_start()
    assert reads == [rec.LOCK_NAME] and info.holder == "run-a"
    assert info.renew_time != "2026-12-01T12:00:00.000000Z"  # held_lock's lock: the real clock
    # The replace keeps the lease's own duration, not the default of a lock that never read it.
    assert kube.objects[("lease", rec.LOCK_NAME)]["spec"]["leaseDurationSeconds"] == 90
    # From its own write on, the next renewal is one patch again.
    later.renew()
    assert reads == [rec.LOCK_NAME] and kube.lease_patches == 2


def test_a_stale_version_never_overwrites_the_holder_that_took_over() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    version = lock(kube, clock, "run-a").acquire().resource_version
    clock.now += timedelta(seconds=120)  # expired: run-b takes over
    lock(kube, clock, "run-b").acquire()
    taken = dict(kube.objects[("lease", rec.LOCK_NAME)]["spec"])
    stale = held_lock(kube, "run-a", version)
    assert stale is not None
    with pytest.raises(rec.LockLost, match="run-b"):
        stale.renew_at_batch_start()
    assert kube.objects[("lease", rec.LOCK_NAME)]["spec"] == taken


def test_without_patch_permission_the_renewal_reads_and_replaces() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    a.acquire()
    kube.patch_forbidden = True
    reads = _counting_reads(kube)
    clock.now += timedelta(seconds=10)
    assert a.renew().renew_time == "2026-12-01T12:00:10.000000Z"
    a.renew()
    # The patch is tried once; every later renewal goes straight to read + replace.
    assert kube.lease_patches == 1 and reads == [rec.LOCK_NAME, rec.LOCK_NAME]


def test_the_release_is_one_conditional_write_and_never_frees_a_lock_taken_over() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    a.acquire()
    reads = _counting_reads(kube)
    assert a.release() is True
    assert reads == [] and kube.lease_patches == 1
    spec = kube.objects[("lease", rec.LOCK_NAME)]["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    # A version whose lease another rollout took over since: read, judged not ours, left as it is.
    version = lock(kube, clock, "run-a").acquire().resource_version
    clock.now += timedelta(seconds=120)
    lock(kube, clock, "run-b").acquire()
    taken = dict(kube.objects[("lease", rec.LOCK_NAME)]["spec"])
    stale = lock(kube, clock, "run-a")
    stale.written_version = version
    assert stale.release() is False
    assert kube.objects[("lease", rec.LOCK_NAME)]["spec"] == taken


def test_a_deleted_lease_is_lost_on_the_conditional_renewal() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a = lock(kube, clock, "run-a")
    a.acquire()
    del kube.objects[("lease", rec.LOCK_NAME)]
    with pytest.raises(rec.LockLost, match="gone"):
        a.renew()


def test_release_is_idempotent_and_only_by_the_holder() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    a, b = lock(kube, clock, "run-a"), lock(kube, clock, "run-b")
    a.acquire()
    assert b.release() is False
    assert kube.objects[("lease", rec.LOCK_NAME)]["spec"]["holderIdentity"] == "run-a"
    assert a.release() is True
    assert a.release() is False
    assert kube.objects[("lease", rec.LOCK_NAME)]["spec"]["holderIdentity"] == ""
    taken = b.acquire()  # a released lock is free at once, and nobody "stopped without release"
    assert taken.holder == "run-b" and taken.taken_over_from is None


def test_record_store_create_then_compare_and_set() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    store = rec.RecordStore(kube, clock=clock)
    assert store.read() is None
    first = store.write(rec.Record(settings={"worker": {"offering": "a"}}), None)
    assert first.resource_version and first.updated == "2026-12-01T12:00:00.000000Z"
    with pytest.raises(rec.RecordConflict) as info:
        store.write(rec.Record(), None)  # created meanwhile
    assert info.value.current == first
    second = store.write(rec.Record(settings={"worker": {"offering": "b"}}), first.resource_version)
    with pytest.raises(rec.RecordConflict):
        store.write(rec.Record(), first.resource_version)  # stale
    assert store.read() == second


def test_set_cancel_keeps_the_rest_of_the_record() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    store = rec.RecordStore(kube, clock=clock)
    store.write(rec.Record(settings={"control": {"offering": "x"}}, last_error="e"), None)
    cancelled = store.set_cancel()
    assert cancelled.cancel and cancelled.settings == {"control": {"offering": "x"}} and cancelled.last_error == "e"


def test_holder_identity_default_is_unique_per_lock() -> None:
    a, b = rec.default_holder_identity(), rec.default_holder_identity()
    assert a != b and a.rsplit("-", 2)[1].isdigit()


def test_acquire_judges_the_lease_the_run_read_moments_ago_without_reading_again() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    lock(kube, clock, "run-a").acquire()
    lock(kube, clock, "run-a").release()
    seen = lock(kube, clock, "run-b").read()
    reads = _counting_reads(kube)
    taken = lock(kube, clock, "run-b").acquire(seen=seen)
    assert reads == [] and taken.holder == "run-b" and taken.transitions == 1
    # No lease at all, as the read found: created without a read.
    other, clock2 = FakeKube(), FakeClock(T0)
    reads = _counting_reads(other)
    assert lock(other, clock2, "run-a").acquire(absent=True).holder == "run-a" and reads == []


def test_acquire_on_a_lease_written_since_the_read_reads_again_and_judges_that() -> None:
    kube, clock = FakeKube(), FakeClock(T0)
    lock(kube, clock, "run-a").acquire()
    clock.now += timedelta(seconds=120)  # run-a stopped renewing: expired when read
    seen = lock(kube, clock, "run-b").read()
    assert seen is not None and seen.expired
    lock(kube, clock, "run-c").acquire()  # another rollout took it over meanwhile
    reads = _counting_reads(kube)
    with pytest.raises(LockHeld, match="run-c"):
        lock(kube, clock, "run-b").acquire(seen=seen)  # the replace on the old version is a 409
    assert reads  # and the lease was read again to judge it
    # Created by someone else since a read that found none: the create is a 409, then judged.
    other, clock2 = FakeKube(), FakeClock(T0)
    lock(other, clock2, "run-x").acquire()
    with pytest.raises(LockHeld, match="run-x"):
        lock(other, clock2, "run-y").acquire(absent=True)
