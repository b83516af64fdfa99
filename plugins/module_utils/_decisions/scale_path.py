# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""A node's path under ``rollout_live_scale: auto``: ``live`` (scale the running VM, restart the
kubelet, no drain) or ``restart`` (cordon, drain, stop, change, start), and why.

``live`` only when the one change is a service offering CloudStack applies to a running VM, judged
on what was read before anything changes. Every rule is CloudStack's
(``UserVmManagerImpl.upgradeRunningVirtualMachine``, 4.22; pull request 12975 for 4.23): what was
not read is the restart path, never a guess. Root disk and affinity group changes always restart:
an affinity change needs a stopped VM, and a disk grown online would still need the guest's
partition and file system grown.

Also here: what the node must report after the kubelet restart (``expected_capacity``), and the
words of the node's Event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

LIVE, RESTART = "live", "restart"
NEVER, AUTO = "never", "auto"
LIVE_SCALE_CHOICES = (NEVER, AUTO)
#: upgradeRunningVirtualMachine's supportedHypervisorTypes.
LIVE_HYPERVISORS = frozenset({"KVM", "XenServer", "VMware", "Simulator"})
#: The kernel keeps a struct page (64 bytes) per 4 KiB page of memory it onlines: 1/64 of the added memory.
PAGE_TABLE_SHARE = 64
#: What a booted kernel keeps of its VM's memory besides those page structures (its image, the
#: firmware's ranges, a crash kernel: up to an eighth of a small VM) stays well under 1/4: a kubelet
#: reporting less has not seen all of it. Generous, so that no VM is judged unaware for its kernel alone.
BOOT_KEPT_SHARE = 4


@dataclass(frozen=True)
class OfferingFacts:
    """A service offering as listServiceOfferings shows it (for a custom offering: the VM's values)."""

    name: str
    cpu: int
    memory_mb: int
    speed_mhz: int
    custom: bool  # iscustomized
    dynamic_scaling: bool  # dynamicscalingenabled


@dataclass(frozen=True)
class LiveFacts:
    """What decides the path, as read. None: not read (or not readable with this key)."""

    version: Optional[str]  # listCapabilities cloudstackversion
    zone_dynamic_scale: Optional[bool]  # listCapabilities dynamicscalingenabled (enable.dynamic.scale.vm)
    vm_dynamically_scalable: Optional[bool]  # listVirtualMachines isdynamicallyscalable
    hypervisor: Optional[str]
    vm_state: str
    current: Optional[OfferingFacts]
    target: Optional[OfferingFacts]


@dataclass(frozen=True)
class ScalePath:
    path: str  # live | restart
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


def _at_least(version: str, wanted: tuple[int, int]) -> bool:
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    return len(parts) == 2 and parts >= wanted


def scale_path(mode: str, changes: frozenset[str], facts: Optional[LiveFacts], phased: bool = False,
               unaware: Optional[str] = None) -> ScalePath:
    """The path of one node. ``changes``: the kinds of its change (offering, root_disk, affinity_groups).

    ``phased``: a batch run in phases for per-node hooks; its hooks are written around a drain and a
    restart, so such a batch keeps the restart path. ``unaware``: why its kubelet has not seen what
    its VM has (``kubelet_unaware``); with nothing to change, the live path restarts only the kubelet.
    """
    if mode != AUTO:
        return ScalePath(RESTART, "rollout_live_scale is never")
    if not changes and unaware is not None:
        if phased:
            return ScalePath(RESTART, "per-node hooks run around a drain and a restart")
        return ScalePath(LIVE, f"the VM already has its offering, the kubelet is restarted to see it: {unaware}")
    if not changes:
        return ScalePath(RESTART, "nothing to change")
    if "root_disk" in changes:
        return ScalePath(RESTART, "the root disk changes: grown online, the guest's partition would still need growing")
    if "affinity_groups" in changes:
        return ScalePath(RESTART, "the affinity groups change: CloudStack changes them on a stopped VM only")
    if phased:
        return ScalePath(RESTART, "per-node hooks run around a drain and a restart")
    if facts is None:
        return ScalePath(RESTART, "what CloudStack would decide could not be read")
    return _offering_path(facts)


def _offering_path(f: LiveFacts) -> ScalePath:
    if f.vm_state != "Running":
        return ScalePath(RESTART, f"the VM is {f.vm_state}: nothing runs to scale")
    if f.current is None or f.target is None:
        return ScalePath(RESTART, "the current or the new offering could not be read")
    if f.version is None:
        return ScalePath(RESTART, "the CloudStack release could not be read")
    if f.hypervisor is None:
        return ScalePath(RESTART, "the VM's hypervisor could not be read")
    if f.hypervisor not in LIVE_HYPERVISORS:
        return ScalePath(RESTART, f"CloudStack scales no running VM on {f.hypervisor}")
    cur, new = f.current, f.target
    if new.dynamic_scaling != cur.dynamic_scaling:
        return ScalePath(RESTART, f"{cur.name} and {new.name} differ in dynamic scaling")
    if new.cpu < cur.cpu or new.memory_mb < cur.memory_mb or new.speed_mhz < cur.speed_mhz:
        return ScalePath(RESTART, f"{cur.name} -> {new.name} is no scale up (a running VM only grows)")
    if (new.cpu, new.memory_mb, new.speed_mhz) == (cur.cpu, cur.memory_mb, cur.speed_mhz):
        return ScalePath(RESTART, f"{new.name} has the same size as {cur.name}")
    if f.hypervisor == "KVM" and not cur.custom and not _at_least(f.version, (4, 23)):
        return ScalePath(RESTART, f"CloudStack {f.version} scales a running KVM VM only on a custom offering (4.23 also fixed)")
    if f.zone_dynamic_scale is None:
        return ScalePath(RESTART, "enable.dynamic.scale.vm could not be read")
    if not f.zone_dynamic_scale:
        return ScalePath(RESTART, "enable.dynamic.scale.vm is false")
    if f.vm_dynamically_scalable is None:
        return ScalePath(RESTART, "whether the VM is dynamically scalable could not be read")
    if not f.vm_dynamically_scalable:
        return ScalePath(RESTART, "the VM is not dynamically scalable (its template, offering or zone did not allow it)")
    return ScalePath(LIVE, f"{cur.name} -> {new.name} on a running {f.hypervisor} VM (CloudStack {f.version})")


@dataclass(frozen=True)
class ExpectedCapacity:
    cpu: int
    memory_kib: int  # at least this much allocatable memory
    why: str


def expected_capacity(new: OfferingFacts, old_memory_mb: int, old_allocatable_kib: int) -> ExpectedCapacity:
    """What the node must report once its kubelet restarted: the offering's vCPUs, and allocatable
    memory of at least the offering's less what the kubelet and the kernel keep.

    That share is measured on the node itself before the scale (the old offering's memory less the
    old allocatable: the kubelet's reservations and eviction threshold, and what the kernel keeps),
    which does not grow with the memory, plus 1/64 of the added memory for the kernel's page
    structures of it.
    """
    kept = max(0, old_memory_mb * 1024 - old_allocatable_kib)
    added = max(0, new.memory_mb - old_memory_mb) * 1024
    page_tables = added // PAGE_TABLE_SHARE
    floor = memory_floor_kib(new.memory_mb, kept, added)
    return ExpectedCapacity(new.cpu, floor, f"{kept // 1024} MiB kept by the kubelet and the kernel before the scale,"
                                            f" {page_tables // 1024} MiB of page structures for the added memory")


def memory_floor_kib(memory_mb: int, kept_kib: int, onlined_kib: int) -> int:
    """The least memory a node shows for a VM of ``memory_mb``: less what is kept (measured on the
    node, or the most a kernel keeps), and the kernel's page structures of what it onlined."""
    return memory_mb * 1024 - kept_kib - onlined_kib // PAGE_TABLE_SHARE


def kubelet_unaware(kubelet_cpu: Optional[int], kubelet_memory: Optional[str], vm_cpu: int,
                    vm_memory_mb: int) -> Optional[str]:
    """Why a node's kubelet reports less than its VM has (a live scale it has not seen: its VM was
    scaled and the kubelet not restarted since), else None. What is not reported is not judged.

    CPUs are exact. Memory (``status.capacity``, the guest's MemTotal) is judged against the floor
    ``memory_floor_kib`` draws for the whole of the VM's memory, as booted (at most 1/4 kept, and
    the page structures of it all): only a kubelet that saw well less than the VM has is below it.
    """
    unseen = "a live scale not yet seen by the kubelet"
    if kubelet_cpu is not None and kubelet_cpu < vm_cpu:
        return f"kubelet reports {kubelet_cpu} CPU, its VM has {vm_cpu} ({unseen})"
    memory = quantity_kib(kubelet_memory)
    if memory is not None and vm_memory_mb > 0 and memory < aware_memory_kib(vm_memory_mb):
        return (f"kubelet reports {memory / 1024 ** 2:.1f} GiB of memory, its VM has {vm_memory_mb / 1024:.1f} GiB"
                f" ({unseen})")
    return None


def aware_memory_kib(vm_memory_mb: int) -> int:
    """The least memory capacity of a kubelet that has seen all of its VM's ``vm_memory_mb``."""
    whole = vm_memory_mb * 1024
    return memory_floor_kib(vm_memory_mb, whole // BOOT_KEPT_SHARE, whole)


def quantity_kib(value: Optional[str]) -> Optional[int]:
    """A memory quantity of a Node's status in KiB (Ki, Mi, Gi or bytes); None when unreadable."""
    if not value:
        return None
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G)?", str(value))
    if match is None:
        return None
    number, unit = int(match.group(1)), match.group(2) or ""
    factor = {"": 1 / 1024, "Ki": 1, "Mi": 1024, "Gi": 1024 ** 2, "Ti": 1024 ** 3,
              "k": 1000 / 1024, "M": 1000 ** 2 / 1024, "G": 1000 ** 3 / 1024}[unit]
    return int(number * factor)


def _section(status: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = status.get(key)
    return found if isinstance(found, Mapping) else {}


def reports_capacity(status: Mapping[str, Any], expected: ExpectedCapacity) -> tuple[bool, str]:
    """Whether a Node's status shows the new size, and what it shows."""
    cpu = str(_section(status, "capacity").get("cpu", ""))
    memory = quantity_kib(str(_section(status, "allocatable").get("memory", "")))
    if cpu != str(expected.cpu):
        return False, f"reports {cpu or 'no'} CPU, not {expected.cpu}"
    if memory is None or memory < expected.memory_kib:
        return False, f"reports {memory or 0} KiB allocatable memory, less than {expected.memory_kib} KiB"
    return True, f"{cpu} CPU, {memory} KiB allocatable"


def reports_vm_size(status: Mapping[str, Any], vm_cpu: int, vm_memory_mb: int) -> tuple[bool, str]:
    """Whether a Node's status shows all its VM has (``kubelet_unaware``'s rule), and what it shows."""
    capacity = _section(status, "capacity")
    cpu = str(capacity.get("cpu", ""))
    unaware = kubelet_unaware(int(cpu) if cpu.isdigit() else None, str(capacity.get("memory", "")) or None,
                              vm_cpu, vm_memory_mb)
    return unaware is None, unaware or f"{cpu} CPU, {capacity.get('memory')} as its VM has"


def capacity_words(status: Mapping[str, Any]) -> str:
    """A Node's capacity as an operator says it: "8 CPU, 31.2 GiB"."""
    capacity = _section(status, "capacity")
    memory = quantity_kib(str(capacity.get("memory", "")))
    gib = f"{memory / 1024 ** 2:.1f} GiB" if memory is not None else "? GiB"
    return f"{capacity.get('cpu', '?')} CPU, {gib}"


def event_words(offering: str, status: Mapping[str, Any]) -> str:
    """The node's Event: "scaled to m-8 without a restart; kubelet restarted; capacity now 8 CPU, 31.2 GiB"."""
    return f"scaled to {offering} without a restart; kubelet restarted; capacity now {capacity_words(status)}"


@dataclass(frozen=True)
class GuestView:
    """The guest's own count, read in its namespaces: vCPUs online, the domain's possible vCPUs, MemTotal."""

    cpus: Optional[int]
    possible_cpus: Optional[int]
    memory_kib: Optional[int]


def cpu_count(text: str) -> Optional[int]:
    """A sysfs CPU list (/sys/devices/system/cpu/online or possible: "0-3,6") as a count."""
    text = text.strip()
    total = 0
    for part in text.split(","):
        bounds = part.split("-")
        if not all(re.fullmatch(r"\d+", b) for b in bounds) or len(bounds) > 2:
            return None
        total += int(bounds[-1]) - int(bounds[0]) + 1
    return total or None


def memtotal_kib(meminfo: str) -> Optional[int]:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo, re.MULTILINE)
    return int(match.group(1)) if match else None


def headroom_refusal(guest: GuestView, new: OfferingFacts) -> Optional[str]:
    """Why the running domain cannot take the new vCPUs (it was started without room), else None."""
    if guest.possible_cpus is None:
        return "the guest's possible vCPUs could not be read"
    if guest.possible_cpus < new.cpu:
        return (f"the running domain was started with room for {guest.possible_cpus} vCPUs, not {new.cpu}:"
                " it must be restarted once before it can be scaled live")
    return None


#: What the plan says of a live path's vCPU headroom when it did not look in the guest (a dry run,
#: cks_node_outdated: they create no pod): the node cycle reads it before it scales.
HEADROOM_LATER = "headroom checked before the scale"


def needs_headroom(decided: ScalePath, facts: Optional[LiveFacts]) -> bool:
    """Whether a live path adds vCPUs, and so depends on the running domain's maximum: CloudStack
    does not show it (the domain's ``<vcpu>`` was written by ``KVMGuru`` at the VM's last start, from
    the release and ``kvm.cpu.dynamic.scaling.capacity`` of that time), so the guest is asked."""
    return (decided.path == LIVE and facts is not None and facts.current is not None and facts.target is not None
            and facts.target.cpu > facts.current.cpu)


def with_headroom(decided: ScalePath, facts: Optional[LiveFacts], guest: Optional[GuestView],
                  error: Optional[str] = None) -> ScalePath:
    """The plan's path once the guest was asked (before the lock) how many vCPUs its running domain
    has room for: a domain started without room for the new vCPUs takes the restart path, with why.
    ``guest`` None and no ``error``: not asked (the plan then says the cycle checks it)."""
    if not needs_headroom(decided, facts) or facts is None or facts.target is None:
        return decided
    if error is not None:
        return ScalePath(RESTART, f"the guest's possible vCPUs could not be read before the lock: {error}")
    if guest is None:
        return ScalePath(LIVE, f"{decided.reason}; {HEADROOM_LATER}")
    refusal = headroom_refusal(guest, facts.target)
    if refusal is not None:
        return ScalePath(RESTART, refusal)
    return ScalePath(LIVE, f"{decided.reason}; the running domain has room for {guest.possible_cpus} vCPUs")


def guest_sees(before: GuestView, after: GuestView, old: OfferingFacts, new: OfferingFacts) -> tuple[bool, str]:
    """Whether the guest onlined what was added: the new vCPU count, and MemTotal grown by the added
    memory less the kernel's page structures of it (1/64)."""
    if after.cpus is None or after.memory_kib is None or before.memory_kib is None:
        return False, "the guest's vCPUs or memory could not be read"
    if after.cpus < new.cpu:
        return False, f"the guest has {after.cpus} vCPUs online, not {new.cpu} (hot-added vCPUs left offline)"
    added = max(0, new.memory_mb - old.memory_mb) * 1024
    wanted = before.memory_kib + added - added // PAGE_TABLE_SHARE
    if after.memory_kib < wanted:
        return False, (f"the guest shows MemTotal {after.memory_kib} kB, less than {wanted} kB"
                       " (hot-added memory left offline)")
    return True, f"the guest has {after.cpus} vCPUs and MemTotal {after.memory_kib} kB online"
