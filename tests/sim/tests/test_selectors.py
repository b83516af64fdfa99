"""cks-sim's label and field selectors against the cases of apimachinery's own tests.

The tables are read from ``pkg/labels/selector_test.go`` (TestSelectorParse, TestSelectorMatches,
TestSetSelectorParser, TestRequirementConstructor, TestRequirementSelectorMatching, TestLexer)
and ``pkg/fields/selector_test.go`` (TestSelectorParse, TestSelectorMatches, TestSplitTerms,
TestEscapeValue); the error texts from ``pkg/labels/selector.go`` (Parser.parse and its
helpers, NewRequirement), ``pkg/util/validation`` and ``pkg/fields/selector.go``. The last tests
ask the simulator's API over HTTP, as a client and kubectl see it.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Optional

import kubernetes.client as k8s
import pytest
from cks_sim.tools import binary, needs
from cks_sim.harness import SimHandle
from cks_sim.selectors import (
    SelectorError,
    from_label_selector,
    object_selects,
    parse_fields,
    parse_labels,
    unescape_value,
)
from kubekit import KubeEnv

KUBECTL = binary("kubectl")

LABELS_GOOD = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5",
               "\rx", "this-is-a-dns.domain.com/key-with-dash",
               "this-is-another-dns.domain.com/key-with-dash in (so,what)",
               "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)", "foo  in\t (abc)", "x notin\n (abc)",
               "x  notin\t\t\t(abc,def)", "x in (abc,)", "x in ()", "x notin (abc,def),bar,z in (),w",
               "x,y in (a)", "x notin ( )", "x notin (, a)", "a ", "a in (x,y,notin, z,in)", "notin=in"]

# (selector, the API server's message)
LABELS_BAD = [
    ("x=a||y=b", 'unable to parse requirement: values[0][x]: Invalid value: "a||y": a valid label must be an '
                 "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                 "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                 "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x<a", 'unable to parse requirement: values[0]: Invalid value: "a": for \'Gt\', \'Lt\' operators, the value '
            "must be an integer"),
    # Two commas in a row: the grammar wants an identifier after each.
    ("x,,y", "found ',', expected: identifier after ','"),
    (",x,y", "found ',', expected: !, identifier, or 'end of string'"),
    ("x nott in (y)", "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"),
    ("a in (xyz),", "found '', expected: identifier after ','"),
    ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
    ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'"),
    ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a (", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("a" * 64, f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": name part must be no more '
               "than 63 characters"),
    ("Example.com/x", 'unable to parse requirement: <nil>: Invalid value: "Example.com/x": prefix part a '
                      "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                      "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                      "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
]

# (selector, labels, matches)
LABELS_MATCH: list[tuple[str, dict[str, str], bool]] = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    # TestRequirementSelectorMatching, written as strings
    ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("x notin (),y", {"y": ""}, True),
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("z>1", {"z": "2"}, True),
    ("z>1", {"z": "v2"}, False),
    # A missing key satisfies != and notin (Requirement.Matches).
    ("x!=a", {}, True),
    ("x notin (a)", {}, True),
]


@pytest.mark.parametrize("text", LABELS_GOOD)
def test_label_selectors_kubernetes_parses(text: str) -> None:
    parse_labels(text)


@pytest.mark.parametrize("text,message", LABELS_BAD)
def test_label_selectors_kubernetes_refuses_with_its_message(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_labels(text)
    assert str(info.value) == message


@pytest.mark.parametrize("text,labels,expected", LABELS_MATCH)
def test_label_selector_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_labels(text).matches(labels) is expected


def test_parsed_values_are_the_sets_kubernetes_builds() -> None:
    # TestSetSelectorParser's expected requirements: sorted by key, values a sorted set with "" for
    # an empty place in the list.
    selector = parse_labels("x notin (abc,def),bar,z in (),w")
    assert [(r.key, r.operator, r.values) for r in selector.requirements] == [
        ("bar", "exists", ()), ("w", "exists", ()), ("x", "notin", ("abc", "def")), ("z", "in", ("",))]
    assert parse_labels("a in (x,y,notin, z,in)").requirements[0].values == ("in", "notin", "x", "y", "z")
    assert parse_labels("x in (abc,)").requirements[0].values == ("", "abc")
    assert parse_labels("x notin (, a)").requirements[0].values == ("", "a")


@pytest.mark.parametrize("selector,labels,expected", [
    (None, {"a": "b"}, False),                       # no selector: nothing
    ({}, {"a": "b"}, True),                          # empty: everything
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, {"tier": "b"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False),
    # Invalid ones select nothing (the eviction handler skips a PDB whose selector does not convert).
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}, {"tier": ""}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, {"tier": "2"}, False),
    ({"matchLabels": {"app": "-web"}}, {"app": "-web"}, False),
])
def test_object_label_selectors(selector: Optional[dict[str, Any]], labels: dict[str, str], expected: bool) -> None:
    assert object_selects(selector, labels) is expected


def test_object_label_selector_errors_are_kubernetes_texts() -> None:
    with pytest.raises(SelectorError, match='^"Gt" is not a valid label selector operator$'):
        from_label_selector({"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError) as info:
        from_label_selector({"matchExpressions": [{"key": "x", "operator": "In", "values": []}]})
    assert str(info.value) == "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"


# fields: (selector, fields, matches)
FIELDS_MATCH: list[tuple[str, dict[str, str], bool]] = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x==y", {"x": "y"}, True),
    ("foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\", {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}, True),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    ("x=", {}, True),      # a missing field is the empty string
    ("x!=", {}, False),
]

FIELDS_BAD = [
    ("x=a||y=b", "invalid field selector: unescaped character in value: 61"),
    ("x==a==b", "invalid field selector: unescaped character in value: 61"),
    ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
    ("x in (a)", "invalid selector: 'x in (a)'; can't understand 'x in (a)'"),
    ("x in (a,b,c)", "invalid selector: 'x in (a,b,c)'; can't understand 'b'"),
    ("x", "invalid selector: 'x'; can't understand 'x'"),
    ("k=\\a", "invalid field selector: invalid escape sequence: \\a"),
    ("k=\\", "invalid field selector: invalid escape sequence: \\"),
]


@pytest.mark.parametrize("text,fields,expected", FIELDS_MATCH)
def test_field_selector_matching(text: str, fields: dict[str, str], expected: bool) -> None:
    assert parse_fields(text).matches(lambda name: fields.get(name, "")) is expected


@pytest.mark.parametrize("text", ["x=a,y=b,z=c", "", "x!=a,y=b", "x=a||y\\=b", "x=a\\=\\=b"])
def test_field_selectors_kubernetes_parses(text: str) -> None:
    parse_fields(text)


@pytest.mark.parametrize("text,message", FIELDS_BAD)
def test_field_selectors_kubernetes_refuses_with_its_message(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_fields(text)
    assert str(info.value) == message


@pytest.mark.parametrize("escaped,value", [("", ""), ("a", "a"), ("\\=", "="), ("\\,", ","), ("\\\\", "\\"),
                                           ("\\\\\\=\\\\\\,\\\\", "\\=\\,\\")])
def test_field_values_unescape(escaped: str, value: str) -> None:
    assert unescape_value(escaped) == value


def test_field_selector_escaped_comma_is_no_separator() -> None:
    selector = parse_fields("k=\\,,k2=v2")
    assert sorted((t.field, t.value) for t in selector.terms) == [("k", ","), ("k2", "v2")]
    assert parse_fields("spec.nodeName=n1,status.phase!=Running").requires_exact_match("spec.nodeName") == "n1"
    assert parse_fields("spec.nodeName!=n1").requires_exact_match("spec.nodeName") is None


def test_unsupported_field_label() -> None:
    with pytest.raises(SelectorError, match="^field label not supported: spec.providerID$"):
        parse_fields("spec.providerID=x").check_fields({"metadata.name"})


# ---------------------------------------------------------------------------------------------
# Through the API


def test_bad_selectors_are_400_bad_request_status(kube_env: KubeEnv) -> None:  # noqa: F811
    cases = [
        (dict(label_selector="a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        (dict(field_selector="spec.providerID=x"), "field label not supported: spec.providerID"),
        (dict(field_selector="metadata.name"), "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        (dict(label_selector="x in (a", field_selector="metadata.name"),
         "unable to parse requirement: found '', expected: ',' or ')'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(k8s.ApiException) as info:
            kube_env.core.list_node(**kwargs)
        assert info.value.status == 400
        status = json.loads(info.value.body)
        assert (status["kind"], status["status"], status["reason"], status["code"]) == \
            ("Status", "Failure", "BadRequest", 400)
        assert status["message"] == message


@needs("kubectl")
def test_selectors_through_kubectl(sim: SimHandle) -> None:
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(KUBECTL), "--kubeconfig", sim.env["kubeconfig"], *args], capture_output=True,
                              text=True, timeout=90, check=False)

    controls = kubectl("get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name")
    workers = kubectl("get", "nodes", "-l", "!node-role.kubernetes.io/control-plane", "-o", "name")
    assert controls.returncode == 0 and workers.returncode == 0, controls.stderr + workers.stderr
    control_names, worker_names = controls.stdout.split(), workers.stdout.split()
    assert control_names and worker_names and not set(control_names) & set(worker_names)
    first = worker_names[0].split("/", 1)[1]
    named = kubectl("get", "nodes", "--field-selector", f"metadata.name={first}", "-o", "name")
    assert named.stdout.split() == [f"node/{first}"]
    others = kubectl("get", "nodes", "--field-selector", f"metadata.name!={first}", "-l",
                     "!node-role.kubernetes.io/control-plane", "-o", "name")
    assert sorted(others.stdout.split()) == sorted(worker_names[1:])
    pods = kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={first},status.phase=Running",
                   "-o", "jsonpath={.items[*].spec.nodeName}")
    assert pods.returncode == 0 and set(pods.stdout.split()) <= {first}
    bad = kubectl("get", "nodes", "-l", "a b")
    # kubectl puts its own "Unable to find ..." before the API server's message, once.
    assert bad.returncode != 0
    assert bad.stderr.startswith("Error from server (BadRequest): ") and bad.stderr.count("Unable to find") == 1
    assert bad.stderr.rstrip().endswith(
        "that match label selector \"a b\", field selector \"\": unable to parse requirement: found 'b', "
        "expected: in, notin, =, ==, !=, gt, lt")
