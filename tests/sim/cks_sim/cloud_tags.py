"""Resource tags of cks-sim's CloudStack world: createTags and deleteTags (quick jobs of no VM)
over the taggable resource types. A mixin over ``cloud_state.CloudState``: methods only."""

from __future__ import annotations

from typing import Any, Container, Optional

from .cloud_entities import Job
from .cloud_errors import CS_CLOUD_RUNTIME, CloudError, param_error
from .cloud_jobs import CloudJobs
from .cloud_views import CloudViews

TAGGABLE_TYPES = {
    t.lower(): t
    for t in ("UserVm", "Volume", "Network", "PublicIpAddress", "PortForwardingRule", "Template", "ISO",
              "Snapshot", "Vpc", "ServiceOffering", "DiskOffering", "Zone", "Project", "LoadBalancer",
              "FirewallRule", "SecurityGroup", "Nic", "AffinityGroup")
}


class CloudTags(CloudJobs, CloudViews):
    """Tags by resource id (``tags``), as TaggedResourceManagerImpl keeps them."""

    def _tag_type(self, resourcetype: str) -> str:
        canonical = TAGGABLE_TYPES.get(resourcetype.lower())
        if canonical is None:
            raise param_error(f"Invalid resource type {resourcetype}")
        return canonical

    def _resource_exists(self, resourcetype: str, resource_id: str) -> bool:
        tables: dict[str, Container[str]] = {
            "UserVm": self.vms, "Volume": self.volumes, "Network": self.networks,
            "PublicIpAddress": self.public_ips, "PortForwardingRule": self.pf_rules,
            "ServiceOffering": self.service_offerings, "DiskOffering": self.disk_offerings,
            "AffinityGroup": self.affinity_groups}
        table = tables.get(resourcetype)
        return table is not None and resource_id in table

    def create_tags(self, resource_ids: list[str], resourcetype: str, tags: list[dict[str, str]],
                    customer: Optional[str]) -> Job:
        def work() -> dict[str, Any]:
            kind = self._tag_type(resourcetype)
            for rid in resource_ids:
                if not self._resource_exists(kind, rid):
                    raise param_error(f"Unable to find resource by id {rid} and type {kind}")
            for tag in tags:
                if not tag.get("value"):
                    raise param_error(f"Value for the key {tag.get('key')} is either null or empty")
            for rid in resource_ids:
                for tag in tags:
                    if any(t["key"] == tag["key"] for t in self.tags.get(rid, [])):
                        raise CloudError(530, f"tag {tag['key']} already on {kind} with id {rid}", CS_CLOUD_RUNTIME)
            for rid in resource_ids:
                for tag in tags:
                    self.tags.setdefault(rid, []).append({
                        "key": tag["key"], "value": tag["value"], "resourceid": rid, "resourcetype": kind,
                        **self.owner_fields(self.caller.id), **({"customer": customer} if customer else {}),
                    })
            return {"success": True}

        return self._quick_job("createTags", work)

    def delete_tags(self, resource_ids: list[str], resourcetype: str, tags: Optional[list[dict[str, str]]]) -> Job:
        def work() -> dict[str, Any]:
            kind = self._tag_type(resourcetype)
            doomed = []
            for rid in resource_ids:
                for tag in self.tags.get(rid, []):
                    if tag["resourcetype"] != kind:
                        continue
                    if tags and not any(
                        t.get("key") == tag["key"] and (not t.get("value") or t["value"].lower() == tag["value"].lower())
                        for t in tags
                    ):
                        continue
                    doomed.append(tag)
            if not doomed:
                raise param_error("Unable to find any tags which conform to specified delete parameters")
            for tag in doomed:
                self.tags[tag["resourceid"]].remove(tag)
            return {"success": True}

        return self._quick_job("deleteTags", work)
