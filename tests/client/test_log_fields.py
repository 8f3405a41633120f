"""Every record logged for a member carries its identity: the filter, the context that marks a
member's tasks, and the list of the library's loggers it goes on (held to the code)."""

from __future__ import annotations

import ast
import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from aiogroup.client.logs import (
    LIBRARY_LOGGERS,
    LogIdentity,
    install_member_fields,
    member_context,
)

PACKAGE = Path(__file__).resolve().parents[2] / "aiogroup"


class Machine:
    member_id = "m-1"
    generation_id = 7


def library_logger_names() -> set[str]:
    """Every logger name the library (not its test tooling or tools) asks ``getLogger`` for."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module.startswith(("aiogroup.testing", "aiogroup.tools")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
            ):
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names.add(arg.value)
                elif isinstance(arg, ast.Name) and arg.id == "__name__":
                    names.add(module.removesuffix(".__init__"))
    return names


def test_every_library_logger_gets_the_fields() -> None:
    found = library_logger_names()
    assert "aiogroup.client" in found and "aiogroup.consumer" in found
    assert found - {"aiogroup"} <= set(LIBRARY_LOGGERS)  # the filter is on each of them


def record_of(logger: str, identity: LogIdentity | None, **extra: Any) -> logging.LogRecord:
    """The record one ``warning`` on ``logger`` makes, inside ``identity``'s context if given."""
    install_member_fields()
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    log = logging.getLogger(logger)
    log.addHandler(handler)
    try:
        if identity is None:
            log.warning("outside", extra=extra)
        else:
            member_context(identity).run(log.warning, "inside", extra=extra)
    finally:
        log.removeHandler(handler)
    (record,) = seen
    return record


def test_a_members_records_carry_its_identity_read_when_made() -> None:
    machine = Machine()
    identity = LogIdentity("billing", client_id="b-1", group_instance_id="i-3", member=machine)
    r = record_of("aiogroup.consumer", identity)
    fields = {k: getattr(r, k) for k in ("group_id", "client_id", "member_id", "generation_id",
                                         "group_instance_id")}  # fmt: skip
    assert fields == {"group_id": "billing", "client_id": "b-1", "member_id": "m-1",
                      "generation_id": 7, "group_instance_id": "i-3"}  # fmt: skip
    machine.generation_id = 8
    assert record_of("aiogroup.membership", identity).generation_id == 8  # type: ignore[attr-defined]
    given = record_of("aiogroup.client", identity, member_id="new-one")
    assert given.member_id == "new-one"  # type: ignore[attr-defined]  # extra wins
    epoch = LogIdentity("g", member=machine, epoch=True)  # KIP-848: an epoch, not a generation
    r = record_of("aiogroup.client", epoch)
    assert r.member_epoch == 8 and not hasattr(r, "generation_id")  # type: ignore[attr-defined]


def test_records_outside_a_members_tasks_are_left_alone() -> None:
    r = record_of("aiogroup.client", None)
    assert not hasattr(r, "group_id") and not hasattr(r, "member_id")


async def test_tasks_started_in_a_members_context_inherit_it() -> None:
    identity = LogIdentity("billing", member=Machine())
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    install_member_fields()
    log = logging.getLogger("aiogroup.consumer")
    log.addHandler(handler := Keep())
    try:

        async def child() -> None:
            log.warning("from a task the member's task started")

        async def members_task() -> None:
            await asyncio.create_task(child())

        await asyncio.create_task(members_task(), context=member_context(identity))
    finally:
        log.removeHandler(handler)
    assert [getattr(r, "group_id", None) for r in seen] == ["billing"]


@pytest.mark.parametrize("name", LIBRARY_LOGGERS)
def test_installing_twice_adds_one_filter(name: str) -> None:
    install_member_fields()
    install_member_fields()
    from aiogroup.client.logs import MemberFields

    assert sum(isinstance(f, MemberFields) for f in logging.getLogger(name).filters) == 1
