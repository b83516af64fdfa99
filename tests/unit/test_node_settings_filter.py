"""The ``node_settings`` filter: a survey's text answer and a vars file's mapping give the same
setting; anything else is refused with the variable's name and the shape to give."""

from __future__ import annotations

from typing import Any

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.cloudstack.cks.plugins.filter.node_settings import FilterModule, node_settings

NAME = "rollout_node_offerings"


@pytest.mark.parametrize("given", [
    {"worker": "cks-large"},
    '{"worker": "cks-large"}',            # JSON text (an AWX textarea answer)
    "worker: cks-large\n",                # YAML text
    "{worker: cks-large}",                # YAML flow style
])
def test_a_mapping_or_its_text_gives_the_mapping(given: Any) -> None:
    assert node_settings(given, NAME) == {"worker": "cks-large"}


def test_lists_and_numbers_inside_keep_their_types() -> None:
    assert node_settings("worker: [a, b]\ncontrol: []", "rollout_node_affinity_groups") == {
        "worker": ["a", "b"], "control": []}
    assert node_settings('{"worker": 40}', "rollout_node_root_disk_sizes") == {"worker": 40}


@pytest.mark.parametrize("given", ["", "   \n", None, {}])
def test_blank_is_no_setting(given: Any) -> None:
    assert node_settings(given, NAME) == {}


@pytest.mark.parametrize("given, kind", [("cks-large", "text"), ("[cks-large]", "a list"), (["a"], "a list"), (3, "a number"), (True, "a bool")])
def test_anything_but_a_mapping_is_refused_naming_the_variable(given: Any, kind: str) -> None:
    with pytest.raises(AnsibleFilterError) as raised:
        node_settings(given, NAME)
    message = str(raised.value)
    assert message.startswith(f"{NAME}={given!r}: must be a mapping of node type")
    assert '{"worker": "cks-large"}' in message and f"got {kind}" in message


def test_text_that_is_not_yaml_is_refused_with_the_parser_problem() -> None:
    with pytest.raises(AnsibleFilterError) as raised:
        node_settings("worker: [cks-large", NAME)
    message = str(raised.value)
    assert message.startswith(f"{NAME}='worker: [cks-large': not JSON or YAML text (")
    assert "\n" not in message


def test_the_filter_is_registered_under_its_name() -> None:
    assert FilterModule().filters()["node_settings"] is node_settings
