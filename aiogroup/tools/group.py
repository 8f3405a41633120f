"""``aiogroup group describe GROUP`` and ``aiogroup group watch GROUP``: a group seen from outside.

``describe`` prints one snapshot: state, generation, protocol, and per member its client id,
host, rebalance protocol, the partitions it reported owning when it joined and those it is
assigned, then the upgrade step and whether bouncing the next member is safe. ``watch`` polls
and prints a line whenever something changes, following a rolling upgrade step by step; on a
terminal it redraws one screen in place instead (:mod:`aiogroup.tools.group_screen`: members,
lag, the rebalances seen with how long each took and what moved; ``--plain`` for the lines). Both
read only (DescribeGroups and Metadata); neither joins the group.

``--lag`` adds the group's lag as ``kafka-consumer-groups --describe`` computes it
(:mod:`aiogroup.observability.lag`): per partition the committed offset, the log end offset
and the lag, per member the total of its partitions, and the group's total (OffsetFetch to the
coordinator, ListOffsets to the leaders). ``watch --lag`` asks every interval and prints the
table again whenever a number moved.

Connection options are those of :class:`~aiogroup.GroupMember`, which hands them to aiokafka's
client: ``--security-protocol``, ``--ssl-cafile/--ssl-certfile/--ssl-keyfile``,
``--sasl-mechanism``, ``--sasl-username`` and ``--sasl-password`` (or ``AIOGROUP_SASL_PASSWORD``
in the environment, which keeps it off the command line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from aiogroup.errors import AiogroupError, ConfigurationError
from aiogroup.inspector import (
    Assessment,
    GroupDescription,
    GroupInspector,
    GroupLag,
    GroupWatch,
    MemberMode,
    Step,
    Verdict,
    assess,
    format_partitions,
)
from aiogroup.migration import MigrationStatus, Stage, Upgrade, migration_status

__all__ = ["client_options", "lag_json", "main", "render_describe", "snapshot_json"]

USAGE = "aiogroup group {describe,watch} GROUP --bootstrap HOST:PORT [options]"
#: Exit status when the coordinator does not know the group (Dead with no members).
EXIT_NO_GROUP = 3
EXIT_CODES = (
    "exit status: 0 done (watch: --until reached); 1 watch --timeout passed first; "
    "2 usage or connection error; 3 the group does not exist (a misspelt group id?)"
)
PASSWORD_ENV = "AIOGROUP_SASL_PASSWORD"
_STEP_NAMES = [s.value for s in Step if s not in (Step.UNKNOWN,)]


def _parser(prog: str = "aiogroup group") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Describe or watch a consumer group (read-only: it never joins the group).",
        epilog=EXIT_CODES,
    )
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("group", help="the group id")
    common.add_argument("--bootstrap", "-b", required=True,
                        help="bootstrap servers, HOST:PORT[,HOST:PORT...]")
    common.add_argument("--members", type=int, default=None, metavar="N",
                        help="how many members the group should have (a bounced member that "
                             "has not rejoined makes the next bounce unsafe)")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--lag", action="store_true",
                        help="the group's lag too: per partition the committed offset, the log "
                             "end offset and the lag, per member and in total (as "
                             "kafka-consumer-groups --describe; needs Describe on the topics)")
    common.add_argument("--request-timeout-ms", type=int, default=10_000)
    common.add_argument("--client-id", default="aiogroup-admin")
    sec = common.add_argument_group("security (as GroupMember's aiokafka options)")
    sec.add_argument("--security-protocol", default="PLAINTEXT",
                     choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    sec.add_argument("--ssl-cafile", help="CA bundle to verify the brokers (PEM)")
    sec.add_argument("--ssl-certfile", help="client certificate (PEM), for mutual TLS")
    sec.add_argument("--ssl-keyfile", help="client private key (PEM)")
    sec.add_argument("--ssl-password", help="password of the client key, if encrypted")
    sec.add_argument("--sasl-mechanism",
                     choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"])
    sec.add_argument("--sasl-username")
    sec.add_argument("--sasl-password", help=f"(better: set {PASSWORD_ENV})")
    d = sub.add_parser("describe", parents=[common], help="one snapshot of the group")
    d.set_defaults(command="describe")
    w = sub.add_parser("watch", parents=[common],
                       help="follow the group (a rolling upgrade) and print every change")
    w.add_argument("--interval", type=float, default=1.0, help="seconds between snapshots")
    w.add_argument("--until", choices=[*_STEP_NAMES, "safe"], default=None,
                   help="exit 0 once the group is at this step with the next bounce safe "
                        "('safe': at any step)")
    w.add_argument("--timeout", type=float, default=None,
                   help="give up after this many seconds (exit 1)")
    w.add_argument("--verbose", "-v", action="store_true",
                   help="print the member table on every change")
    w.add_argument("--plain", action="store_true",
                   help="print a line per change even on a terminal (on a terminal, without "
                        "--json or --plain, one screen is redrawn in place)")
    return p


def client_options(
    args: argparse.Namespace, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """aiokafka client options from the command line, as GroupMember passes them on."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {"security_protocol": args.security_protocol}
    tls = args.security_protocol in ("SSL", "SASL_SSL")
    sasl = args.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    if not tls and (args.ssl_cafile or args.ssl_certfile or args.ssl_keyfile):
        raise ConfigurationError(
            f"--ssl-* options need --security-protocol SSL or SASL_SSL, not "
            f"{args.security_protocol}")
    if tls:
        from aiokafka.helpers import create_ssl_context

        try:
            options["ssl_context"] = create_ssl_context(
                cafile=args.ssl_cafile, certfile=args.ssl_certfile, keyfile=args.ssl_keyfile,
                password=args.ssl_password)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot build the TLS context: {exc}") from exc
    password = args.sasl_password or env.get(PASSWORD_ENV)
    if sasl:
        if not args.sasl_mechanism:
            raise ConfigurationError(f"{args.security_protocol} needs --sasl-mechanism")
        options["sasl_mechanism"] = args.sasl_mechanism
        if args.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            if not args.sasl_username or password is None:
                raise ConfigurationError(
                    f"SASL {args.sasl_mechanism} needs --sasl-username and a password "
                    f"(--sasl-password or {PASSWORD_ENV})")
            options["sasl_plain_username"] = args.sasl_username
            options["sasl_plain_password"] = password
    elif args.sasl_mechanism or args.sasl_username or args.sasl_password:
        raise ConfigurationError(
            f"--sasl-* options need --security-protocol SASL_PLAINTEXT or SASL_SSL, not "
            f"{args.security_protocol}")
    return options


# --------------------------------------------------------------------------- text


def _mode_text(mode: MemberMode | None) -> str:
    return {
        MemberMode.EAGER: "EAGER",
        MemberMode.COOPERATIVE: "COOPERATIVE",
        MemberMode.NEW: "new",
        MemberMode.UNCONFIRMED: "EAGER?",
        MemberMode.UNKNOWN: "?",
        None: "?",
    }[mode]


def _generation_text(group: GroupDescription) -> str:
    if group.consumer_protocol:
        return (f"group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch} "
                "(KIP-848)")
    gen = group.generation
    if gen is not None:
        return f"{gen} (one more than the members report holding)"
    if not group.stable:
        return "? (shown once the group is Stable)"
    return "? (no member reports one: all new, or Subscription V0/V1 without a generation)"


def _assignment_text(group: GroupDescription, a: Assessment) -> str:
    total = len(group.all_partitions)
    if not group.has_assignments:
        return "? (no assignments returned)"
    assigned = sum(len(m.assignment or ()) for m in group.members)
    if not total:
        return f"{assigned} partitions assigned"
    text = f"{total - len(a.unassigned)}/{total} partitions assigned"
    return text + (f", {len(a.doubly_assigned)} twice" if a.doubly_assigned else ", none twice")


def _verdict_text(a: Assessment) -> str:
    if a.verdict is Verdict.SAFE:
        return "safe"
    if a.verdict is Verdict.UNKNOWN:
        return "cannot tell"
    return "wait"


def render_describe(group: GroupDescription, a: Assessment) -> str:
    """The text ``aiogroup group describe`` prints."""
    api = "ConsumerGroupDescribe" if group.consumer_protocol else "DescribeGroups"
    where = ", ".join(x for x in (group.coordinator and f"coordinator {group.coordinator}",
                                  f"{api} v{group.api_version}") if x)
    lines = [f"group {group.group_id}  ({where})"]
    rp = group.rebalance_protocol
    protocol = (f"{group.protocol} ({rp.name})" if group.protocol and rp is not None
                else "- (the broker names none)")
    if group.consumer_protocol:
        protocol = f"{group.protocol or '-'} (the broker's assignor, KIP-848)"
    topics = " ".join(f"{t}[{n}]" for t, n in sorted(group.partitions.items())) or "-"
    rows = [
        ("state", group.state),
        ("generation", _generation_text(group)),
        ("protocol", f"{group.protocol_type or '-'} / {protocol}"),
        ("members", f"{len(group.members)}; {_assignment_text(group, a)}"),
        ("topics", topics),
        ("step", a.step_text),
        ("migration", _migration_text(migration_status(group))),
        *([("lag", _lag_text(group, group.lag))] if group.lag is not None else []),
        ("next bounce", _verdict_text(a) + ("" if a.safe else ": " + "; ".join(a.reasons))),
        ("advice", a.advice),
    ]
    if group.metadata_is_assignment:
        rows.append(("broker", "sends each member's assignment in place of its metadata "
                               "(KAFKA-9150: Apache Kafka 2.3.0-2.3.1); owned partitions and "
                               "generations cannot be read"))
    lines += [f"  {k:<12} {v}" for k, v in rows]
    if group.members:
        lines.append("")
        lines.append(_member_table(group, a))
        if group.protocol and group.has_metadata and not group.consumer_protocol:
            lines.append(
                f"  offered assignors: every member offers {group.protocol} (the vote chose it); "
                "the broker returns each member's metadata for the chosen protocol only, so any "
                "other assignors in its list are not visible from outside")
    if group.lag is not None and group.lag.partitions:
        lines.append("")
        lines.append(_lag_table(group, group.lag))
    return "\n".join(lines)


def _migration_text(status: MigrationStatus) -> str:
    """Where the group stands between the classic and the consumer protocol (KIP-848)."""
    text = status.summary
    if status.upgrade is Upgrade.BLOCKED:
        text += ": " + "; ".join(status.blockers)
    elif status.upgrade is Upgrade.POSSIBLE:
        text += "; the consumer protocol can take over (online upgrade, Kafka 4.x)"
    return text


def _member_table(group: GroupDescription, a: Assessment) -> str:
    head: tuple[str, ...] = ("CLIENT ID", "MEMBER ID", "HOST", "INSTANCE", "PROTOCOL", "SUB",
                             "HELD GEN", "OWNED AT JOIN", "ASSIGNED")
    rows: list[tuple[str, ...]] = []
    if group.consumer_protocol:
        head = ("CLIENT ID", "MEMBER ID", "HOST", "INSTANCE", "SPEAKS", "EPOCH", "SUBSCRIBED",
                "ASSIGNED", "TO REVOKE")
        rows = [(
            m.client_id or "-",
            m.member_id if len(m.member_id) <= 24 else m.member_id[:23] + "…",
            m.client_host or "-",
            m.group_instance_id or "-",
            m.member_type or "?",
            "-" if m.member_epoch is None else str(m.member_epoch),
            ",".join(m.subscription.topics) if m.subscription is not None else "-",
            format_partitions(m.assignment),
            format_partitions(m.pending_revocation),
        ) for m in group.members]  # fmt: skip
    for m in group.members if not group.consumer_protocol else ():
        sub = m.subscription
        gen = m.reported_generation(group.protocol)
        rows.append((
            m.client_id or "-",
            m.member_id if len(m.member_id) <= 24 else m.member_id[:23] + "…",
            m.client_host or "-",
            m.group_instance_id or "-",
            _mode_text(a.modes.get(m.member_id)),
            f"v{sub.version}" if sub is not None else "-",
            "-" if gen is None else ("none" if gen < 0 else str(gen)),
            format_partitions(m.owned) if sub is not None else "?",
            format_partitions(m.assignment) + (f"  ! {m.problem}" if m.problem else ""),
        ))
    lag = group.lag
    if lag is not None:
        head = (*head, "LAG")
        rows = [(*r, _number(lag.of_member(m.member_id)))
                for r, m in zip(rows, group.members, strict=True)]  # fmt: skip
    return _table(head, rows)


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
        for r in (head, *rows)
    )


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _short(member_id: str) -> str:
    return member_id if len(member_id) <= 24 else member_id[:23] + "…"


def _lag_text(group: GroupDescription, lag: GroupLag) -> str:
    """The group's lag and each member's, one line."""
    names = {m.member_id: m.client_id or _short(m.member_id) for m in group.members}
    per_member = ", ".join(f"{names[m.member_id]} {_number(lag.of_member(m.member_id))}"
                           for m in group.members)  # fmt: skip
    unowned = lag.unowned()
    parts = [f"{_number(lag.total)} in total"]
    if per_member:
        parts.append(per_member)
    if unowned:
        parts.append(f"{len(unowned)} committed partition(s) no member is assigned")
    return "; ".join(parts)


def _lag_table(group: GroupDescription, lag: GroupLag) -> str:
    """Per partition, as ``kafka-consumer-groups --describe`` prints it (``-``: unknown)."""
    names = {m.member_id: m.client_id or "-" for m in group.members}
    head = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CLIENT ID",
            "MEMBER ID")  # fmt: skip
    rows = []
    for p in lag.partitions:
        owner = lag.owners.get(p.partition)
        rows.append((
            p.partition.topic, str(p.partition.partition), _number(p.committed),
            _number(p.log_end_offset), _number(p.lag),
            "-" if owner is None else names.get(owner, "-"),
            "-" if owner is None else _short(owner),
        ))  # fmt: skip
    return _table(head, rows)


def lag_json(lag: GroupLag | None) -> dict[str, Any] | None:
    """The ``--json`` form of a group's lag (None: not asked)."""
    if lag is None:
        return None
    return {
        "total": lag.total,
        "partitions": [
            {
                "topic": p.partition.topic,
                "partition": p.partition.partition,
                "committed_offset": p.committed,
                "log_end_offset": p.log_end_offset,
                "lag": p.lag,
                "member_id": lag.owners.get(p.partition),
            }
            for p in lag.partitions
        ],
        "members": {m: lag.of_member(m) for m in sorted(set(lag.owners.values()))},
    }


def snapshot_json(group: GroupDescription, a: Assessment, **extra: Any) -> dict[str, Any]:
    """The ``--json`` form of one snapshot."""
    return {
        "group": group.group_id,
        "group_type": group.group_type,
        "state": group.state,
        "generation": group.generation,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "rebalance_protocol": group.rebalance_protocol.name if group.rebalance_protocol else None,
        "describe_groups_version": group.api_version,
        "has_metadata": group.has_metadata,
        "metadata_is_assignment": group.metadata_is_assignment,
        "partitions": dict(group.partitions),
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "migration": migration_status(group).as_json(),
        "lag": lag_json(group.lag),
        "step": a.step.value,
        "next_bounce": a.verdict.value,
        "reasons": list(a.reasons),
        "advice": a.advice,
        "unassigned": format_partitions(a.unassigned),
        "doubly_assigned": format_partitions(a.doubly_assigned),
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "group_instance_id": m.group_instance_id,
                "mode": a.modes[m.member_id].value if m.member_id in a.modes else None,
                "assignors": [group.protocol] if group.protocol and m.subscription else [],
                "subscription_version": m.subscription.version if m.subscription else None,
                "held_generation": m.reported_generation(group.protocol),
                "topics": list(m.subscription.topics) if m.subscription else None,
                "owned": _tp_list(m.owned),
                "assigned": _tp_list(m.assignment),
                "member_type": m.member_type,
                "member_epoch": m.member_epoch,
                "target": _tp_list(m.target),
                "to_revoke": _tp_list(m.pending_revocation) if m.target is not None else None,
                "assignment_user_data": m.assignment_user_data is not None,
                "problem": m.problem,
                "lag": group.lag.of_member(m.member_id) if group.lag is not None else None,
            }
            for m in group.members
        ],
        **extra,
    }


def _tp_list(partitions: frozenset[Any] | None) -> list[list[Any]] | None:
    return None if partitions is None else [[tp.topic, tp.partition] for tp in sorted(partitions)]


# --------------------------------------------------------------------------- watch


def _missing_text(group: GroupDescription) -> str:
    return (
        f"group {group.group_id!r} does not exist on {group.coordinator or 'the coordinator'} "
        f"(described as {group.state} with no members): check the group id; not safe to bounce"
    )


def _summary_line(group: GroupDescription, a: Assessment, watch: GroupWatch) -> str:
    expected = watch.expected_members or watch.largest
    members = f"{len(group.members)}/{expected} members" if expected else \
        f"{len(group.members)} members"
    gen = group.generation
    protocol = group.protocol or "-"
    speaking = ""
    if group.consumer_protocol and group.stable:
        status = migration_status(group)
        if status.stage is Stage.MIXED:
            speaking = (f"{len(status.consumer_members)} consumer + "
                        f"{len(status.classic_members)} classic")
    eager = a.eager_members
    step = ""
    if watch.upgrading(a):  # upgrade steps only for a group that is (or was) upgrading
        counted = f" ({len(eager)} EAGER)" if eager and group.stable else ""
        step = f"step {a.step.value}{counted}"
    verdict = _verdict_text(a)
    if not a.safe and a.reasons:
        verdict += ": " + a.reasons[0]
    parts = [
        time.strftime("%H:%M:%S"),
        f"{group.group_type:<8}",
        f"{group.state:<19}",
        f"gen {gen:<4}" if gen is not None else "",  # only where the members tell it
        f"{protocol:<18}",
        members,
        speaking,
        _assignment_text(group, a) if group.stable else "",
        f"lag {_number(group.lag.total)}" if group.lag is not None else "",
        step,
        f"next bounce: {verdict}",
    ]
    return "  ".join(p for p in parts if p)


def _changes(before: GroupDescription | None, after: GroupDescription) -> list[str]:
    if before is None:
        return []
    old = {m.member_id: m for m in before.members}
    new = {m.member_id: m for m in after.members}
    out = [f"left    {old[m].client_id or '-'} ({m})" for m in sorted(old.keys() - new.keys())]
    out += [f"joined  {new[m].client_id or '-'} ({m})" for m in sorted(new.keys() - old.keys())]
    if before.group_type != after.group_type and after.members:
        why = ("a member joined with the consumer protocol (KIP-848 online upgrade)"
               if after.consumer_protocol else
               "the last member on the consumer protocol left (KIP-848 online downgrade)")
        out.append(f"converted: {before.group_type} group -> {after.group_type} group: {why}")
    if before.protocol and after.protocol and before.protocol != after.protocol:
        out.append(f"the vote moved: {before.protocol} -> {after.protocol}")
    return out


def _fingerprint(group: GroupDescription, a: Assessment) -> tuple[Any, ...]:
    return (
        group.group_type,
        group.state,
        group.protocol,
        group.generation,
        tuple((m.member_id, m.member_type, m.assignment) for m in group.members),
        a.step,
        a.verdict,
        a.reasons,
        group.lag,
    )


async def watch(
    inspector: GroupInspector,
    *,
    out: TextIO,
    interval: float = 1.0,
    expected_members: int | None = None,
    until: str | None = None,
    timeout: float | None = None,
    as_json: bool = False,
    verbose: bool = False,
    with_lag: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Poll the group every ``interval`` seconds and print each change; returns the exit status
    (0: ``until`` reached or stopped, 1: ``timeout``). ``with_lag``: the group's lag is asked
    every interval too, and a snapshot is printed again, with its lag table, whenever any
    committed offset, log end offset or assignment moved."""
    state = GroupWatch(expected_members=expected_members)
    began = clock()
    last: tuple[Any, ...] | None = None
    errors = 0
    while True:
        try:
            group = await (inspector.describe(with_lag=True) if with_lag else inspector.describe())
        except AiogroupError as exc:  # the coordinator moved or is down: say so, keep watching
            errors += 1
            if errors == 1 or errors % 30 == 0:
                print(f"{time.strftime('%H:%M:%S')}  cannot describe the group: {exc}",
                      file=out, flush=True)
        else:
            errors = 0
            if not group.exists:
                print(f"{time.strftime('%H:%M:%S')}  {_missing_text(group)}", file=out,
                      flush=True)
                return EXIT_NO_GROUP
            before = state.last
            a = state.observe(group)
            fp = _fingerprint(group, a)
            if fp != last:
                last = fp
                if as_json:
                    print(json.dumps(snapshot_json(group, a, time=time.time(),
                                                   restarted=state.restarted)),
                          file=out, flush=True)
                else:
                    print(_summary_line(group, a, state), file=out, flush=True)
                    for change in _changes(before, group):
                        print(f"          {change}", file=out, flush=True)
                    if any(c.startswith("joined") for c in _changes(before, group)):
                        print(f"          {state.restarted} member(s) joined since the watch "
                              "began", file=out, flush=True)
                    if verbose and group.members:
                        print(_member_table(group, a), file=out, flush=True)
                    if group.lag is not None:
                        print(f"          lag: {_lag_text(group, group.lag)}", file=out,
                              flush=True)
                        if group.lag.partitions:
                            print(_lag_table(group, group.lag), file=out, flush=True)
            if until is not None and a.safe and (until == "safe" or a.step.value == until):
                if not as_json:
                    if state.upgrading(a):
                        print(f"reached: step {a.step.value}, next bounce safe. {a.advice}",
                              file=out, flush=True)
                    else:
                        print("reached: next bounce safe", file=out, flush=True)
                return 0
        if timeout is not None and clock() - began >= timeout:
            if not as_json:
                print(f"timed out after {timeout:g} s", file=out, flush=True)
            return 1
        await asyncio.sleep(interval)  # the polling period, not synchronisation


# --------------------------------------------------------------------------- entry point


def _screen_wanted(args: argparse.Namespace, out: TextIO) -> bool:
    """``watch`` redraws one screen when stdout is a terminal that can (not ``--json``, not
    ``--plain``, not TERM=dumb); otherwise it prints a line per change, as scripts read it."""
    if args.json or args.plain or os.environ.get("TERM", "") in ("dumb", ""):
        return False
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    inspector = GroupInspector(
        [s.strip() for s in args.bootstrap.split(",") if s.strip()],
        args.group,
        client_id=args.client_id,
        request_timeout_ms=args.request_timeout_ms,
        **client_options(args),
    )
    await inspector.start()
    try:
        if args.command == "describe":
            group = await inspector.describe(with_lag=args.lag)
            a = assess(group, expected_members=args.members)
            if args.json:
                print(json.dumps(snapshot_json(group, a), indent=2), file=out)
            else:
                print(render_describe(group, a), file=out)
            return 0 if group.exists else EXIT_NO_GROUP
        if _screen_wanted(args, out):
            from aiogroup.tools.group_screen import watch_screen

            return await watch_screen(
                inspector,
                out=out,
                interval=args.interval,
                expected_members=args.members,
                until=args.until,
                timeout=args.timeout,
                with_lag=args.lag,
            )
        return await watch(
            inspector,
            out=out,
            interval=args.interval,
            expected_members=args.members,
            until=args.until,
            timeout=args.timeout,
            as_json=args.json,
            verbose=args.verbose,
            with_lag=args.lag,
        )
    finally:
        await inspector.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, prog: str = "aiogroup group"
) -> int:
    """``aiogroup group ...``; returns the exit status (2: usage or connection error)."""
    try:
        args = _parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return asyncio.run(_run(args, out or sys.stdout))
    except KeyboardInterrupt:
        return 0
    except AiogroupError as exc:
        print(f"aiogroup group: {exc}", file=sys.stderr)
        return 2
