# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The controller's stand-in for AnsibleModule (plugin_utils/controller_module.py) against
AnsibleModule itself: for each module of the collection, the same options give the same params, the
same refusal or the same result, with the same secrets removed."""

from __future__ import annotations

import contextlib
import json
from types import ModuleType
from typing import Any, Callable, Iterator
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.parameters import PASS_VARS

from ansible_collections.cloudstack.cks.plugins.module_utils.ansible_module import run
from ansible_collections.cloudstack.cks.plugins.modules import cks_etcd_quorum, cks_node_cycle, cks_node_outdated, cks_node_settings
from ansible_collections.cloudstack.cks.plugins.plugin_utils.controller_module import ControllerModule, ModuleResult

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19: the way its unit tests always gave a module its arguments

    @contextlib.contextmanager
    def patch_module_args(args: dict[str, Any]) -> Iterator[None]:  # type: ignore[no-redef]
        with mock.patch.object(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()):
            yield


MODULES = {m.__name__.rsplit(".", 1)[-1]: m for m in (cks_node_cycle, cks_node_settings, cks_node_outdated, cks_etcd_quorum)}
#: Whether AnsibleModule returns its invocation unasked: ansible-core 2.21 added INJECT_INVOCATION (default false).
INVOCATION_UNASKED = "inject_invocation" not in PASS_VARS
SECRET = "s3cr3t-api-secret"
CONNECTION = {"api_url": "https://cloud.example/client/api", "api_key": "key", "api_secret": SECRET}


def through_ansible_module(module: ModuleType, args: dict[str, Any], work: Callable[[Any], None],
                           capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """AnsibleModule's result for ``args``, as a shipped module prints it (its exit ends the run)."""
    name = f"cloudstack.cks.{module.__name__.rsplit('.', 1)[-1]}"
    with patch_module_args(dict(args, _ansible_module_name=name)), pytest.raises(SystemExit):
        work(AnsibleModule(**module.module_options()))
    result = json.loads(capsys.readouterr().out)
    result.pop("warnings", None)
    result.pop("deprecations", None)
    return result


def through_controller(module: ModuleType, args: dict[str, Any], work: Callable[[Any], None]) -> dict[str, Any]:
    name = f"cloudstack.cks.{module.__name__.rsplit('.', 1)[-1]}"
    with pytest.raises(ModuleResult) as done:
        work(ControllerModule(name, args, check_mode=False, diff=False, invocation=INVOCATION_UNASKED,
                              **module.module_options()))
    result = dict(done.value.result)
    result.pop("warnings", None)
    return result


def _exit_with_params(module: Any) -> None:
    module.exit_json(changed=False, seen=dict(module.params))


REFUSED = [
    ("cks_node_cycle", {"nodes": ["n1"]}),  # no cluster
    ("cks_node_cycle", dict(CONNECTION, cluster="c1", mode="cycle")),  # required_if: nodes
    ("cks_node_cycle", dict(CONNECTION, cluster="c1", nodes=["n1"], bogus=1)),  # unsupported
    ("cks_node_cycle", dict(CONNECTION, cluster="c1", nodes=["n1"], mode="sideways")),  # choices
    ("cks_node_cycle", dict(CONNECTION, cluster="c1", nodes=["n1"], batch_timeout="soon")),  # type
    ("cks_node_settings", dict(CONNECTION, cluster="c1", rollout=True)),  # required_if: lock_holder
    ("cks_node_outdated", dict(CONNECTION, cluster="c1", etcd_client_cert="/c.pem")),  # required_together
    ("cks_etcd_quorum", dict(CONNECTION, etcd_client_key="/k.pem", bogus=True)),
]


@pytest.mark.parametrize(("name", "args"), REFUSED, ids=[f"{n}-{i}" for i, (n, _a) in enumerate(REFUSED)])
def test_refusals_read_as_ansible_modules_do(name: str, args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    module = MODULES[name]
    expected = through_ansible_module(module, args, _exit_with_params, capsys)
    got = through_controller(module, args, _exit_with_params)
    assert expected["failed"] is True and got["failed"] is True
    assert got["msg"] == expected["msg"]
    assert SECRET not in json.dumps(got)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_params_defaults_and_masked_secret_equal_ansible_modules(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = MODULES[name]
    args = dict(CONNECTION, cluster="c1", nodes=["n1"]) if name == "cks_node_cycle" else dict(CONNECTION, cluster="c1")
    if name == "cks_etcd_quorum":
        args.pop("cluster")
    expected = through_ansible_module(module, args, _exit_with_params, capsys)
    got = through_controller(module, args, _exit_with_params)
    assert got == expected
    # The secret is a param, but never in the result: masked in both the result and its invocation.
    assert SECRET not in json.dumps(got)
    assert got["seen"]["api_secret"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert ("invocation" in got) is INVOCATION_UNASKED


@pytest.mark.parametrize("invocation", [True, False])
def test_the_invocation_is_returned_when_asked_with_its_secrets_masked(invocation: bool) -> None:
    module = ControllerModule("cloudstack.cks.cks_node_outdated", dict(CONNECTION, cluster="c1"), check_mode=False,
                              diff=False, invocation=invocation, **cks_node_outdated.module_options())
    with pytest.raises(ModuleResult) as done:
        module.exit_json(changed=False, invocation={"module_args": {"api_secret": SECRET}})
    result = done.value.result
    if invocation:
        assert result["invocation"]["module_args"]["api_secret"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    else:
        assert "invocation" not in result


def test_environment_fallbacks_fill_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDSTACK_ENDPOINT", "https://env.example/client/api")
    monkeypatch.setenv("CLOUDSTACK_SECRET", "from-the-environment")
    monkeypatch.setenv("CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY", "true")
    module = ControllerModule("cloudstack.cks.cks_node_outdated", {"cluster": "c1"}, check_mode=True, diff=True,
                              **cks_node_outdated.module_options())
    assert module.params["api_url"] == "https://env.example/client/api"
    assert module.params["api_secret"] == "from-the-environment"
    assert module.params["validate_certs"] is False
    assert "from-the-environment" in module.no_log_values
    assert module.check_mode is True and module._diff is True  # pylint: disable=protected-access


def test_a_failure_carries_its_details_warnings_and_no_secret() -> None:
    module = ControllerModule("cloudstack.cks.cks_node_cycle", dict(CONNECTION, cluster="c1", nodes=["n1"]),
                              check_mode=False, diff=False, **cks_node_cycle.module_options())
    module.warn("kube_validate_certs is false")
    with pytest.raises(ModuleResult) as done:
        module.fail_json(msg=f"refused with {SECRET}", node="n1")
    result = done.value.result
    assert result["failed"] is True and result["changed"] is False and result["node"] == "n1"
    assert result["msg"] == "refused with ********"
    assert result["warnings"] == ["kube_validate_certs is false"]
    assert result["invocation"]["module_args"]["nodes"] == ["n1"]  # asked for by default, as before ansible-core 2.21


def test_the_result_passes_the_modules_last_net() -> None:
    """exit_json inside the glue's ``except Exception`` must end the run, not read as an unexpected error."""
    module = ControllerModule("cloudstack.cks.cks_node_outdated", dict(CONNECTION, cluster="c1"), check_mode=False,
                              diff=False, **cks_node_outdated.module_options())
    with pytest.raises(ModuleResult) as done:
        run(module, lambda: {"counts": {"worker": 2}})
    assert done.value.result["counts"] == {"worker": 2} and "failed" not in done.value.result
