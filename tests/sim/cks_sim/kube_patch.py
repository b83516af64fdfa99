"""The three ways a PATCH request changes an object, as the API server applies them: RFC 6902
JSON patch, RFC 7386 JSON merge patch, and Kubernetes' strategic merge patch (pure functions).
"""

from __future__ import annotations

import copy
from typing import Any

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"

# Lists whose items strategic merge patch merges by a key (patchMergeKey in the Go types of
# the objects this API lets clients write); every other list is replaced whole.
_MERGE_KEYS = {
    "conditions": "type", "addresses": "type", "ownerReferences": "uid", "containers": "name",
    "initContainers": "name", "volumes": "name", "env": "name", "volumeMounts": "mountPath",
    "imagePullSecrets": "name", "ports": "containerPort",
}
_PRIMITIVE_MERGE = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Kubernetes strategic merge patch for the fields this API accepts writes to.

    Like a merge patch, but lists with a patch merge key merge item by item, ``$patch`` directives
    (replace, delete) and ``$deleteFromPrimitiveList/<field>`` are honoured.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if key.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering hints, no effect on content here
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        elif isinstance(value, list) and key in _PRIMITIVE_MERGE and isinstance(result.get(key), list):
            result[key] = result[key] + [v for v in value if v not in result[key]]
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_list(current: list, patch: list, merge_key: str) -> list:
    result = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next((i for i, old in enumerate(result)
                      if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: v for k, v in copy.deepcopy(item).items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


class PatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise PatchError(f"missing path element {part!r}")
            doc = doc[part]
        elif isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"invalid array index {part!r}") from None
        else:
            raise PatchError(f"cannot descend into {part!r}")
    return doc


def _json_add(doc: Any, parts: list[str], value: Any, replace: bool) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: /{'/'.join(parts)}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError:
                raise PatchError(f"invalid array index {last!r}") from None
            if replace:
                if not 0 <= index < len(parent):
                    raise PatchError(f"replace operation does not apply: index {index} out of range")
                parent[index] = copy.deepcopy(value)
            else:
                if not 0 <= index <= len(parent):
                    raise PatchError(f"add operation does not apply: index {index} out of range")
                parent.insert(index, copy.deepcopy(value))
    else:
        raise PatchError("cannot add into a scalar")
    return doc


def _json_remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing path: /{'/'.join(parts)}")
        del parent[last]
    elif isinstance(parent, list):
        try:
            del parent[int(last)]
        except (ValueError, IndexError):
            raise PatchError(f"remove operation does not apply: invalid index {last!r}") from None
    else:
        raise PatchError("cannot remove from a scalar")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "add":
            doc = _json_add(doc, parts, op.get("value"), replace=False)
        elif kind == "replace":
            doc = _json_add(doc, parts, op.get("value"), replace=True)
        elif kind == "remove":
            doc = _json_remove(doc, parts)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, source))
            if kind == "move":
                doc = _json_remove(doc, source)
            doc = _json_add(doc, parts, value, replace=False)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc
