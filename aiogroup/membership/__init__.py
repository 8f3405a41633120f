"""The sans-I/O KIP-429 membership state machine.

:class:`MembershipMachine` is one member of a classic consumer group. It never does I/O and never
reads a clock: a *driver* (``aiogroup.client``) feeds it **events** (what happened, past tense)
with the current monotonic time ``now`` (float seconds), and carries out the **actions** it
returns (what to do, imperative), in the order returned.

Driving loop
------------
::

    member = MembershipMachine(
        MemberConfig(group_id="g", assignors=[CooperativeStickyAssignor()])
    )
    actions = member.handle(SubscriptionChanged(topics=frozenset({"orders"})), now)
    while True:
        for action in actions: start(action)            # send requests, run callbacks, ...
        wait until an answer arrives or until member.next_deadline()
        actions = member.handle(answer_event, now)      # or member.handle_timer(now)

Which action expects which event back (echo the action's ``token`` in the event):

=====================  ==========================================================================
action                 answer
=====================  ==========================================================================
FindCoordinator        CoordinatorFound(token, node_id, host, port) once connected, or
                       CoordinatorLookupFailed(token, error_code)
RequestMetadata        MetadataUpdated(partitions_per_topic) covering every topic asked
                       (``topics=None``: all topics, for a regex subscription); no token;
                       ``racks``: with partition_racks (KIP-881, a leader of racked members)
SendJoinGroup          JoinGroupCompleted(token, ...) or JoinGroupFailed(token, error_code,
                       member_id)
SendSyncGroup          SyncGroupCompleted(token, assignment bytes) or SyncGroupFailed(token, code)
SendHeartbeat          HeartbeatCompleted(token) or HeartbeatFailed(token, error_code)
SendLeaveGroup         LeaveGroupCompleted(token, error_code)
CommitOffsets          CommitCompleted(token) or CommitFailed(token, error_code); the machine
                       then emits ResolveCommit(token, error) for the caller of the commit.
                       ``during_join``: send it on another connection than the JoinGroup
InvokeCallbacks        run the listener (:func:`aiogroup.client.callbacks.run_callbacks`), then
                       CallbacksFinished(token, first_error)
ResolveCommit          none: complete the user's commit future with ``error`` (None = ok)
RaiseToUser            none: raise ``error`` from the user's next call (``fatal``: every call)
=====================  ==========================================================================

Any failure to send a request to the coordinator, a dropped connection or a request timeout
is reported as ``CoordinatorLost()``: every coordinator request in flight is then abandoned,
commits in flight resolve with a retriable CoordinatorNotAvailableError, and the machine looks
the coordinator up again. Responses whose token the machine no longer waits for (an older
generation, an abandoned request) are ignored (KAFKA-13406): the driver may deliver them.

User intent is also an event: SubscriptionChanged(topics=... | pattern=...),
UnsubscribeRequested(), CloseRequested(). Commits go through :meth:`MembershipMachine.commit`,
which returns the CommitOffsets action or raises only where the coordinator would refuse:
RebalanceInProgressError (retriable: between a JoinGroup answer and the SyncGroup answer, or
an EAGER member that revoked everything to rejoin), CommitFailedError (not part of a
generation) or CoordinatorNotAvailableError. A COOPERATIVE member commits with its current
generation while it rejoins (KIP-429: it still owns its partitions). Auto-commits the
machine needs (before a rebalance, on unsubscribe and close, KIP-70) come as
``CommitOffsets(offsets=None)``: commit the consumed positions of the partitions owned at that
moment.

Timers
------
:meth:`MembershipMachine.next_deadline` returns when the machine next needs waking (heartbeat
interval, session timeout, retry backoff) or ``None``. Call :meth:`MembershipMachine.handle_timer`
with ``now`` at or after it; calling it early is harmless. Request timeouts belong to the
transport (report them as CoordinatorLost).

Callbacks
---------
InvokeCallbacks lists ``lost``, ``revoked`` and ``assigned`` partitions (frozensets of
TopicPartition). The driver runs them in that order with the runner in
:mod:`aiogroup.client.callbacks`, which skips empty lost/revoked sets, always delivers ``assigned``
when it is not None, runs every callback even if one raises, and answers
``CallbacksFinished(token, first_error)``. The machine then emits ``RaiseToUser`` for that
first error; the assignment change stands (KIP-429). While callbacks run, the machine keeps
heartbeating and accepts other events; the assignment it reports during a revoked callback
still contains the partitions being revoked (so the callback can commit them), but
:attr:`MembershipMachine.fetchable` already excludes them (KAFKA-14196).

Queries: ``state`` (:class:`MemberState`), ``member_id``, ``generation_id``, ``leader_id``,
``is_leader``, ``protocol`` (EAGER/COOPERATIVE), ``assignment``, ``fetchable``,
``subscribed_topics``, ``fatal_error``, and the KAFKA-7026 rule: ``may_act_on(now)`` is
``fetchable`` until ``session_deadline`` (a session timeout after the last request the
coordinator answered as to a member of its generation), then nothing until it answers again.
Consumers fetch, hand out records and commit positions only for ``may_act_on(now)``.

The consumer group protocol (KIP-848, ``group_protocol="consumer"``) has its own machine,
:class:`ConsumerProtocolMachine` (:mod:`aiogroup.membership.consumer_machine`), driven the same
way; both implement :class:`Machine`, what a driver needs.

Misuse (an event the current state cannot take, a malformed event) raises
:class:`aiogroup.errors.LocalProtocolError`; broker errors are data in events.

``GroupMember`` is the machine's name up to 0.1.0, kept as an alias of
:class:`MembershipMachine` (the same class) for one release; the asyncio driver
:class:`aiogroup.client.GroupMember` keeps its name.

Names are imported lazily (PEP 562), so importing one module of the package loads only that module.
"""

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
    from aiogroup.membership.actions import (
        Action,
        CommitOffsets,
        FindCoordinator,
        InvokeCallbacks,
        RaiseToUser,
        RequestMetadata,
        ResolveCommit,
        SendHeartbeat,
        SendJoinGroup,
        SendLeaveGroup,
        SendSyncGroup,
    )
    from aiogroup.membership.consumer_events import (
        ConsumerGroupHeartbeatCompleted,
        ConsumerGroupHeartbeatFailed,
        SendConsumerGroupHeartbeat,
    )
    from aiogroup.membership.consumer_machine import ConsumerMemberConfig, ConsumerProtocolMachine
    from aiogroup.membership.deltas import LeaderPlan, MemberDelta, leader_plan, member_delta
    from aiogroup.membership.errors import AssignorError, RebalanceCallbackError
    from aiogroup.membership.events import (
        CallbacksFinished,
        CloseRequested,
        CommitCompleted,
        CommitFailed,
        CoordinatorFound,
        CoordinatorLookupFailed,
        CoordinatorLost,
        Event,
        HeartbeatCompleted,
        HeartbeatFailed,
        JoinGroupCompleted,
        JoinGroupFailed,
        JoinGroupMember,
        LeaveGroupCompleted,
        MetadataUpdated,
        SubscriptionChanged,
        SyncGroupCompleted,
        SyncGroupFailed,
        UnsubscribeRequested,
    )
    from aiogroup.membership.interface import Machine
    from aiogroup.membership.machine import GroupMember, MemberConfig, MembershipMachine
    from aiogroup.membership.selection import select_protocol
    from aiogroup.membership.states import MemberState


__all__ = [
    "Action",
    "AssignorError",
    "CallbacksFinished",
    "CloseRequested",
    "CommitCompleted",
    "CommitFailed",
    "CommitOffsets",
    "ConsumerGroupHeartbeatCompleted",
    "ConsumerGroupHeartbeatFailed",
    "ConsumerMemberConfig",
    "ConsumerProtocolMachine",
    "CoordinatorFound",
    "CoordinatorLookupFailed",
    "CoordinatorLost",
    "Event",
    "FindCoordinator",
    "GroupMember",
    "HeartbeatCompleted",
    "HeartbeatFailed",
    "InvokeCallbacks",
    "JoinGroupCompleted",
    "JoinGroupFailed",
    "JoinGroupMember",
    "LeaderPlan",
    "LeaveGroupCompleted",
    "Machine",
    "MemberConfig",
    "MemberDelta",
    "MemberState",
    "MembershipMachine",
    "MetadataUpdated",
    "RaiseToUser",
    "RebalanceCallbackError",
    "RequestMetadata",
    "ResolveCommit",
    "SendConsumerGroupHeartbeat",
    "SendHeartbeat",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
    "SubscriptionChanged",
    "SyncGroupCompleted",
    "SyncGroupFailed",
    "UnsubscribeRequested",
    "leader_plan",
    "member_delta",
    "select_protocol",
]

_WHERE = {
    "Action": "aiogroup.membership.actions",
    "CommitOffsets": "aiogroup.membership.actions",
    "FindCoordinator": "aiogroup.membership.actions",
    "InvokeCallbacks": "aiogroup.membership.actions",
    "RaiseToUser": "aiogroup.membership.actions",
    "RequestMetadata": "aiogroup.membership.actions",
    "ResolveCommit": "aiogroup.membership.actions",
    "SendHeartbeat": "aiogroup.membership.actions",
    "SendJoinGroup": "aiogroup.membership.actions",
    "SendLeaveGroup": "aiogroup.membership.actions",
    "SendSyncGroup": "aiogroup.membership.actions",
    "ConsumerGroupHeartbeatCompleted": "aiogroup.membership.consumer_events",
    "ConsumerGroupHeartbeatFailed": "aiogroup.membership.consumer_events",
    "SendConsumerGroupHeartbeat": "aiogroup.membership.consumer_events",
    "ConsumerMemberConfig": "aiogroup.membership.consumer_machine",
    "ConsumerProtocolMachine": "aiogroup.membership.consumer_machine",
    "LeaderPlan": "aiogroup.membership.deltas",
    "MemberDelta": "aiogroup.membership.deltas",
    "leader_plan": "aiogroup.membership.deltas",
    "member_delta": "aiogroup.membership.deltas",
    "AssignorError": "aiogroup.membership.errors",
    "RebalanceCallbackError": "aiogroup.membership.errors",
    "CallbacksFinished": "aiogroup.membership.events",
    "CloseRequested": "aiogroup.membership.events",
    "CommitCompleted": "aiogroup.membership.events",
    "CommitFailed": "aiogroup.membership.events",
    "CoordinatorFound": "aiogroup.membership.events",
    "CoordinatorLookupFailed": "aiogroup.membership.events",
    "CoordinatorLost": "aiogroup.membership.events",
    "Event": "aiogroup.membership.events",
    "HeartbeatCompleted": "aiogroup.membership.events",
    "HeartbeatFailed": "aiogroup.membership.events",
    "JoinGroupCompleted": "aiogroup.membership.events",
    "JoinGroupFailed": "aiogroup.membership.events",
    "JoinGroupMember": "aiogroup.membership.events",
    "LeaveGroupCompleted": "aiogroup.membership.events",
    "MetadataUpdated": "aiogroup.membership.events",
    "SubscriptionChanged": "aiogroup.membership.events",
    "SyncGroupCompleted": "aiogroup.membership.events",
    "SyncGroupFailed": "aiogroup.membership.events",
    "UnsubscribeRequested": "aiogroup.membership.events",
    "Machine": "aiogroup.membership.interface",
    "GroupMember": "aiogroup.membership.machine",
    "MemberConfig": "aiogroup.membership.machine",
    "MembershipMachine": "aiogroup.membership.machine",
    "select_protocol": "aiogroup.membership.selection",
    "MemberState": "aiogroup.membership.states",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
