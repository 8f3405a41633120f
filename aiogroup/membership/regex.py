"""A Python regular expression, written for the broker: KIP-848's ``SubscribedTopicRegex``.

Under the consumer group protocol (``group_protocol="consumer"``) the broker, not the member,
matches the subscription's regular expression against the cluster's topics, with RE2/J (the
Java port of RE2; Java's consumer takes it as a ``SubscriptionPattern``). Python's ``re`` and
RE2 read most patterns alike but not all: RE2 has no backreferences, lookaround, conditionals,
atomic groups or possessive repeats, spells Python's ``\\Z`` as ``\\z``, and bounds repeats at
1000. :func:`to_re2` parses the pattern with Python's own parser and writes the same
expression again in the syntax both share, so what the broker matches is what Python's
``fullmatch`` would; a construct RE2 lacks is a :class:`~aiogroup.errors.ConfigurationError`
naming it.

Where the two differ only on characters no topic name can hold (a Kafka topic name is
``[a-zA-Z0-9._-]``, at most 249 of them), the pattern is accepted: Python's ``\\w``, ``\\d``
and ``\\s`` are Unicode-aware and RE2's are ASCII, ``$`` also matches before a final newline in
Python, ``\\s`` includes the vertical tab only in Python. Both match the whole topic name
(``fullmatch``; RE2/J's ``matches()``).
"""

from __future__ import annotations

import importlib
import re
import string
from typing import Any

from aiogroup.errors import ConfigurationError

# Python's own regular expression parser: ``re._parser`` since 3.11 (``sre_parse`` before, a
# deprecated alias now), private but what ``re.compile`` itself runs.
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

__all__ = ["RE2_MAX_REPEAT", "to_re2"]

#: RE2 refuses a repeat count above this.
RE2_MAX_REPEAT = 1000

_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))
_AT = {
    _c.AT_BEGINNING: "^",
    _c.AT_BEGINNING_STRING: r"\A",
    _c.AT_END: "$",
    _c.AT_END_STRING: r"\z",
    _c.AT_BOUNDARY: r"\b",
    _c.AT_NON_BOUNDARY: r"\B",
}
_CATEGORY = {
    _c.CATEGORY_DIGIT: r"\d",
    _c.CATEGORY_NOT_DIGIT: r"\D",
    _c.CATEGORY_SPACE: r"\s",
    _c.CATEGORY_NOT_SPACE: r"\S",
    _c.CATEGORY_WORD: r"\w",
    _c.CATEGORY_NOT_WORD: r"\W",
}
#: What RE2 lacks, by Python's opcode.
_MISSING = {
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group (?(...)...)",
    "ASSERT": "a lookahead or lookbehind",
    "ASSERT_NOT": "a negative lookahead or lookbehind",
    "ATOMIC_GROUP": "an atomic group (?>...)",
    "POSSESSIVE_REPEAT": "a possessive repeat (*+, ++, ?+)",
    "GROUPREF_IGNORE": "a backreference",
}


#: Opcodes that write one atom (a repeat applies to them without a group).
_ATOMS = (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN, _c.SUBPATTERN, _c.BRANCH)


class _Refused(Exception):
    pass


def to_re2(pattern: re.Pattern[str] | str) -> str:
    """``pattern`` in the syntax RE2/J and Python read alike (the broker matches the whole topic
    name with it, as ``fullmatch`` does). Raises :class:`ConfigurationError` for what RE2 lacks
    or Python cannot compile."""
    compiled = pattern if isinstance(pattern, re.Pattern) else _compile(pattern)
    if not isinstance(compiled.pattern, str):
        raise ConfigurationError("pattern must be a str regular expression, not bytes")
    source = compiled.pattern
    try:
        tree = _parser.parse(source, compiled.flags)
        body = _emit(list(tree))
    except _Refused as exc:
        raise ConfigurationError(
            f"pattern {source!r} uses {exc}, which the broker's RE2/J regular expressions "
            "lack: with group_protocol='consumer' the broker matches the pattern (KIP-848); "
            "write it without that construct, or use group_protocol='classic'"
        ) from None
    flags = "".join(letter for flag, letter in _FLAGS if compiled.flags & flag)
    return (f"(?{flags})" if flags else "") + body


def _compile(source: str) -> re.Pattern[str]:
    try:
        return re.compile(source)
    except re.error as exc:
        raise ConfigurationError(f"pattern {source!r} is not a regular expression: {exc}") from None


def _emit(items: list[tuple[Any, Any]]) -> str:
    return "".join(_emit_one(op, av) for op, av in items)


def _emit_one(op: Any, av: Any) -> str:
    name = str(op)
    if name in _MISSING:
        raise _Refused(_MISSING[name])
    if op is _c.LITERAL:
        return _literal(av)
    if op is _c.NOT_LITERAL:
        return f"[^{_literal(av)}]"
    if op is _c.ANY:
        return "."
    if op is _c.IN:
        return _class(av)
    if op is _c.AT:
        if av not in _AT:
            raise _Refused(f"the anchor {av}")
        return _AT[av]
    if op is _c.BRANCH:
        return "(?:" + "|".join(_emit(list(branch)) for branch in av[1]) + ")"
    if op is _c.SUBPATTERN:
        group, add, remove, sub = av
        body = _emit(list(sub))
        if add or remove:
            on = "".join(letter for flag, letter in _FLAGS if add & flag)
            off = "".join(letter for flag, letter in _FLAGS if remove & flag)
            return f"(?{on}{'-' + off if off else ''}:{body})"
        return f"({body})" if group is not None else f"(?:{body})"
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        low, high, sub = av
        if low > RE2_MAX_REPEAT or (high != _c.MAXREPEAT and high > RE2_MAX_REPEAT):
            raise _Refused(f"a repeat count above {RE2_MAX_REPEAT}")
        items = list(sub)
        atom = _emit(items)
        if len(items) != 1 or items[0][0] not in _ATOMS:
            atom = f"(?:{atom})"
        return atom + _quantifier(low, high) + ("?" if op is _c.MIN_REPEAT else "")
    raise _Refused(f"the construct {name}")


def _quantifier(low: int, high: int) -> str:
    if high == _c.MAXREPEAT:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if (low, high) == (0, 1):
        return "?"
    if low == high:
        return f"{{{low}}}"
    return f"{{{low},{high}}}"


def _literal(code: int) -> str:
    """One character, inside a class or out: punctuation escaped, the rest as ``\\x{..}``."""
    char = chr(code)
    if char.isascii() and (char.isalnum() or char == "_"):
        return char
    if char in string.punctuation:
        return "\\" + char
    return f"\\x{{{code:x}}}"


def _class(items: list[tuple[Any, Any]]) -> str:
    out = []
    negate = ""
    for op, av in items:
        if op is _c.NEGATE:
            negate = "^"
        elif op is _c.LITERAL:
            out.append(_literal(av))
        elif op is _c.RANGE:
            out.append(f"{_literal(av[0])}-{_literal(av[1])}")
        elif op is _c.CATEGORY and av in _CATEGORY:
            out.append(_CATEGORY[av])
        else:
            raise _Refused(f"the character class item {op} {av}")
    return f"[{negate}{''.join(out)}]"
