"""The tag commands of cks-sim's CloudStack API: listTags, and createTags and deleteTags (jobs run
by ``cloud_tags``)."""

from __future__ import annotations

from typing import Any

from .cloudstack_call import Call, handler, matches_keyword


@handler("listTags")
def list_tags(call: Call) -> dict[str, Any]:
    out = []
    for tags in call.cloud.tags.values():
        for tag in tags:
            if call.get("resourceid") and tag["resourceid"] != call.get("resourceid").lower():
                continue
            if call.get("resourcetype") and tag["resourcetype"].lower() != call.get("resourcetype").lower():
                continue
            if call.get("key") and tag["key"] != call.get("key"):
                continue
            if call.get("value") and tag["value"] != call.get("value"):
                continue
            if call.get("customer") and tag.get("customer") != call.get("customer"):
                continue
            if not matches_keyword(tag, call.get("keyword"), "key", "value"):
                continue
            out.append(dict(tag))
    return call.listing(out)


def _tag_rows(call: Call) -> list[dict[str, str]]:
    return [{"key": row.get("key", ""), "value": row.get("value", "")} for row in call.get("tags", []) or []]


@handler("createTags")
def create_tags(call: Call) -> dict[str, Any]:
    ids = [i.lower() for i in call.get("resourceids")]
    return call.job(call.cloud.create_tags(ids, call.get("resourcetype"), _tag_rows(call), call.get("customer")))


@handler("deleteTags")
def delete_tags(call: Call) -> dict[str, Any]:
    ids = [i.lower() for i in call.get("resourceids")]
    rows = _tag_rows(call) if call.get("tags") else None
    return call.job(call.cloud.delete_tags(ids, call.get("resourcetype"), rows))
