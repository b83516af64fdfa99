"""Label and field selectors as the Kubernetes API server parses and matches them.

Written from apimachinery's own code, not from the collection's (whose drain decisions it
judges): ``pkg/labels/selector.go`` (the ``Lexer``, ``Parser.parse`` and its
``parseRequirement`` / ``parseValues`` / ``parseExactValue``, ``NewRequirement``'s validation,
``Requirement.Matches``), ``pkg/util/validation`` (``IsQualifiedName``, ``IsValidLabelValue``:
the texts of the key and value errors), ``pkg/apis/meta/v1/helpers.go``
(``LabelSelectorAsSelector``: a PDB's or a ReplicaSet's ``matchLabels`` / ``matchExpressions``)
and ``pkg/fields/selector.go`` (``splitTerms``, ``splitTerm``, ``UnescapeValue``,
``parseSelector``). The error texts are theirs: the API server answers a selector it cannot
parse with 400 BadRequest and the parser's message (``handlers/get.go`` ListResource, after
``ParameterCodec.DecodeParameters``); kubectl puts "Unable to find ... that match label
selector ..." in front of it on its own side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional


class SelectorError(ValueError):
    """A selector the API server refuses; ``str()`` is its message."""


# ---------------------------------------------------------------------------------------------
# Validation (pkg/util/validation): the texts an invalid key or value is refused with

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # validation.RegexError: each example is followed by ", " and joined by " or ".
    return f"{msg} (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: a label key ``[prefix/]name``."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name " + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character", _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.match(prefix):
                errors.append("prefix part " + _regex_error(
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                    "'.', and must start and end with an alphanumeric character", _DNS1123_SUBDOMAIN_FMT,
                    "example.com"))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        errors.append("name part " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character", _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errors: list[str] = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errors.append(_regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character", _LABEL_VALUE_FMT,
            "MyValue", "my_value", "12345"))
    return errors


def _invalid(path: str, value: Any, details: list[str]) -> str:
    """field.Invalid(...).Error(): ``<path>: Invalid value: <value>: <details>``.

    The parser passes no path, and a nil ``*field.Path`` prints as ``<nil>``; a string value is
    quoted (%q), a list of values printed as Go's %#v does.
    """
    shown = f'"{value}"' if isinstance(value, str) else "[]string{" + ", ".join(f'"{v}"' for v in value) + "}"
    return f"{path}: Invalid value: {shown}: " + "; ".join(details)


def _aggregate(errors: list[str]) -> Optional[str]:
    """ErrorList.ToAggregate().Error(): one message alone, several in brackets."""
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


# ---------------------------------------------------------------------------------------------
# Requirements (labels.Requirement)

IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = "exists", "!", "gt", "lt"
# selection's binaryOperators, in the order the parser lists them when it expects one.
_BINARY = [IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN]


def _as_int(text: str) -> Optional[int]:
    # strconv.ParseInt(text, 10, 64): an optional sign and decimal digits, within int64.
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    number = int(text)
    return number if -(2 ** 63) <= number < 2 ** 63 else None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Requirement.Matches: a missing key satisfies notin, != and !key; nothing else."""
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (GREATER_THAN, LESS_THAN):
            have = _as_int(labels[self.key]) if present else None
            want = _as_int(self.values[0]) if len(self.values) == 1 else None
            if have is None or want is None:
                return False
            return have > want if self.operator == GREATER_THAN else have < want
        return False


def new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """labels.NewRequirement: the key, the operator's arity and every value checked."""
    vals = list(values)
    errors: list[str] = []
    key_errors = qualified_name_errors(key)
    if key_errors:
        errors.append(_invalid("key", key, key_errors))
    if operator in (IN, NOT_IN):
        if not vals:
            errors.append(_invalid("values", vals, ["for 'in', 'notin' operators, values set can't be empty"]))
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errors.append(_invalid("values", vals, ["exact-match compatibility requires one single value"]))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errors.append(_invalid("values", vals, ["values set must be empty for exists and does not exist"]))
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errors.append(_invalid("values", vals, ["for 'Gt', 'Lt' operators, exactly one value is required"]))
        for i, value in enumerate(vals):
            if _as_int(value) is None:
                errors.append(_invalid(f"values[{i}]", value,
                                       ["for 'Gt', 'Lt' operators, the value must be an integer"]))
    else:
        supported = ", ".join(f'"{op}"' for op in [*_BINARY, EXISTS, "!"])
        errors.append(f'operator: Unsupported value: "{operator}": supported values: {supported}')
    for i, value in enumerate(vals):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(_invalid(f"values[{i}][{key}]", value, value_errors))
    message = _aggregate(errors)
    if message:
        raise SelectorError(message)
    return Requirement(key, operator, tuple(vals))


@dataclass(frozen=True)
class LabelSelector:
    """labels.Selector: every requirement must match; ``nothing`` matches no object at all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Optional[Mapping[str, str]]) -> bool:
        if self.nothing:
            return False
        have = labels or {}
        return all(r.matches(have) for r in self.requirements)

    def empty(self) -> bool:
        return not self.nothing and not self.requirements


# ---------------------------------------------------------------------------------------------
# The label selector string: labels.Parse

_END, _CLOSE, _COMMA, _NOT, _DOUBLE_EQ, _EQ, _GT, _IDENT, _IN, _LT, _NOT_EQ, _NOT_IN, _OPEN, _ERROR = range(14)
_TOKENS = {")": _CLOSE, ",": _COMMA, "!": _NOT, "==": _DOUBLE_EQ, "=": _EQ, ">": _GT, "in": _IN, "<": _LT,
           "!=": _NOT_EQ, "notin": _NOT_IN, "(": _OPEN}
_SPECIAL = set("=!(),><")
_BLANK = set(" \t\r\n")


def _lex(text: str) -> list[tuple[int, str]]:
    """The Lexer's tokens to the end of the string (Lex until EndOfStringToken)."""
    tokens: list[tuple[int, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _BLANK:
            pos += 1
        if pos >= len(text):
            tokens.append((_END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            # scanSpecialSymbol: the longest run of symbols that is still a token.
            buffer, last = "", None
            while pos < len(text) and text[pos] in _SPECIAL:
                if buffer + text[pos] in _TOKENS:
                    buffer += text[pos]
                    last = buffer
                    pos += 1
                elif last is not None:
                    break
                else:
                    buffer += text[pos]
                    pos += 1
            tokens.append((_TOKENS[last], last) if last else (_ERROR, f"error expected: keyword found '{buffer}'"))
        else:
            start = pos
            while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _BLANK:
                pos += 1
            word = text[start:pos]
            tokens.append((_TOKENS.get(word, _IDENT) if word in ("in", "notin") else _IDENT, word))


class _Parser:
    """labels.Parser: a recursive descent over the scanned tokens.

    In the Values context (everywhere but where an operator is expected) ``in`` and ``notin``
    are identifiers: ``x in (in,notin)`` and ``notin=in`` are valid.
    """

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.position]
        return (_IDENT if values and tok in (_IN, _NOT_IN) else tok), lit

    def consume(self, values: bool = True) -> tuple[int, str]:
        found = self.lookahead(values)
        self.position += 1
        return found

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_IDENT, _NOT):
                try:
                    requirements.append(self.requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume()
                if tok == _END:
                    return requirements
                if tok != _COMMA:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
                tok, lit = self.lookahead()
                if tok not in (_IDENT, _NOT):
                    raise SelectorError(f"found '{lit}', expected: identifier after ','")
            elif tok == _END:
                return requirements
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        key, operator = self.key_and_inferred_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        operator = self.operator()
        values = self.values() if operator in (IN, NOT_IN) else self.exact_value()
        # The parser collects the values in a sets.String: each once, sorted.
        return new_requirement(key, operator, sorted(values))

    def key_and_inferred_operator(self) -> tuple[str, str]:
        operator = ""
        tok, lit = self.consume()
        if tok == _NOT:
            operator = DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key_errors = qualified_name_errors(lit)
        if key_errors:
            raise SelectorError(_invalid("<nil>", lit, key_errors))
        if self.lookahead()[0] in (_END, _COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return lit, operator

    def operator(self) -> str:
        tok, lit = self.consume(values=False)
        found = {_IN: IN, _EQ: EQUALS, _DOUBLE_EQ: DOUBLE_EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN,
                 _NOT_IN: NOT_IN, _NOT_EQ: NOT_EQUALS}.get(tok)
        if found is None:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY)}")
        return found

    def values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == _CLOSE:  # "()": the one empty value
            self.consume()
            return {""}
        if tok not in (_IDENT, _COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        found = self.identifiers()
        if self.consume()[0] != _CLOSE:
            raise SelectorError(f"found '{lit}', expected: ')'")
        return found

    def identifiers(self) -> set[str]:
        """parseIdentifiersList: commas with nothing between them stand for the empty value."""
        found: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _IDENT:
                found.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSE:
                    return found
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:
                if not found:
                    found.add("")
                tok2 = self.lookahead()[0]
                if tok2 == _CLOSE:
                    found.add("")
                    return found
                if tok2 == _COMMA:
                    found.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        tok = self.lookahead()[0]
        if tok in (_END, _COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _IDENT:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_labels(text: str) -> LabelSelector:
    """labels.Parse of a ``labelSelector`` query parameter; an empty one selects everything."""
    requirements = _Parser(text or "").parse()
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def from_label_selector(selector: Optional[Mapping[str, Any]]) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: none selects nothing, an empty one everything."""
    if selector is None:
        return LabelSelector(nothing=True)
    requirements = [new_requirement(k, EQUALS, [v]) for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator = expression.get("operator")
        if operator not in _OPERATORS:
            raise SelectorError(f'"{operator}" is not a valid label selector operator')
        requirements.append(new_requirement(expression.get("key") or "", _OPERATORS[operator],
                                            expression.get("values") or []))
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


def object_selects(selector: Optional[Mapping[str, Any]], labels: Optional[Mapping[str, str]]) -> bool:
    """Whether an object's ``spec.selector`` (a PDB's) selects these labels.

    A selector that does not convert selects nothing, as the eviction handler skips such a PDB.
    """
    try:
        return from_label_selector(selector).matches(labels)
    except SelectorError:
        return False


# ---------------------------------------------------------------------------------------------
# The field selector string: fields.ParseSelector


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negated: bool = False


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    def matches(self, value_of: Callable[[str], str]) -> bool:
        """andTerm of hasTerm / notHasTerm: ``value_of`` gives an object's selectable field."""
        return all((value_of(t.field) != t.value) if t.negated else (value_of(t.field) == t.value)
                   for t in self.terms)

    def requires_exact_match(self, field: str) -> Optional[str]:
        """RequiresExactMatch: the value a ``field=`` / ``field==`` term demands, if there is one."""
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None

    def check_fields(self, supported: Iterable[str]) -> None:
        """The field label conversion of the resource: an unknown field is a bad request."""
        allowed = set(supported)
        for term in self.terms:
            if term.field not in allowed:
                raise SelectorError(f"field label not supported: {term.field}")


def _split_terms(text: str) -> list[str]:
    """splitTerms: commas split, a backslash-escaped one does not (it stays escaped)."""
    if not text:
        return []
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> Optional[tuple[str, str, str]]:
    """splitTerm: the first operator from the left, != before == before =."""
    for i in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, i):
                return term[:i], operator, term[i + len(operator):]
    return None


def unescape_value(text: str) -> str:
    """UnescapeValue: ``\\\\``, ``\\,`` and ``\\=`` stand for themselves; any other escape,
    a lone trailing backslash or a bare ``,`` / ``=`` is refused."""
    if not any(ch in text for ch in "\\,="):
        return text
    out, escaped = [], False
    for ch in text:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            # UnescapedRune's message prints the rune with %v: its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_fields(text: str) -> FieldSelector:
    """fields.ParseSelector of a ``fieldSelector`` query parameter (=, == and != only)."""
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text or "")):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, raw = split
        terms.append(FieldTerm(field, unescape_value(raw), negated=operator == "!="))
    return FieldSelector(tuple(terms))
