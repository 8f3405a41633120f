"""The leader's rounds: assigning (KIP-429 2a-2f), withholding, and what a leader remembers.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). :class:`Leadership` takes the members of a
JoinGroup answer, plans the round's assignments with the assignor and
:func:`~aiogroup.membership.deltas.leader_plan`, and remembers the partitions it withheld
because a member still claimed them (2d), so that they are always given out
(``docs/safety.md``, "withheld partitions are always given out"): a follow-up rebalance when
their owner does not free them, and claims ignored when it keeps claiming them.

It also writes the marks an aiogroup leader puts in its cooperative assignments
(:data:`HAND_OFF_AWARE`, :data:`FOLLOW_UP`) and reads them (:func:`leader_marks`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiogroup.assignors.base import PartitionAssignor, PartitionRacks, run_assignor
from aiogroup.errors import AiogroupError
from aiogroup.membership.deltas import (
    LeaderPlan,
    claimants,
    drop_claims,
    leader_plan,
    unassigned_partitions,
)
from aiogroup.membership.events import JoinGroupMember
from aiogroup.protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    decode_subscription,
    encode_assignment,
)

__all__ = [
    "FOLLOW_UP",
    "FOLLOW_UP_MAX_MEMBERS",
    "HAND_OFF_AWARE",
    "MARK_PREFIX",
    "LeaderRound",
    "Leadership",
    "announce_hand_off_aware",
    "leader_marks",
    "without_marks",
]

log = logging.getLogger("aiogroup.membership")

#: The mark an aiogroup leader puts in each cooperative assignment: "I withhold the partitions
#: a member still claims, even of topics it no longer subscribes to, for one round". A hand-off
#: (CloseRequested.hand_off) is safe only under such a leader.
HAND_OFF_AWARE = b"aiogroup:hand-off/1"
#: Added in a round that withheld partitions a member still claims (KIP-429 2d): "a follow-up
#: round is coming". The member that gives them up rejoins as soon as it has revoked them, and
#: the others learn of that round only from a heartbeat: told this, aiogroup members heartbeat
#: at a fast pace for a while (see :meth:`aiogroup.membership.liveness.Liveness.heartbeat_due`
#: and docs/rolling-bounce.md).
FOLLOW_UP = b"aiogroup:follow-up/1"
#: Larger groups get no FOLLOW_UP mark: ten heartbeats per member within a tenth of the
#: interval would be a burst of 10,000 a second per hundred members on the coordinator.
FOLLOW_UP_MAX_MEMBERS = 100

#: Every mark starts so. Marks travel as entries of the assignment with no partitions under the
#: mark as a topic name: Kafka's topic names are made of ``[a-zA-Z0-9._-]`` only, so a name with
#: ``:`` and ``/`` is never a topic. Not in the assignment's user data, which belongs to the
#: assignor, and which Kafka 4.x's online upgrade of a classic group to the consumer protocol
#: (KIP-848) refuses ("userData from a custom assignor would be lost": the first
#: consumer-protocol member gets GROUP_ID_NOT_FOUND), while it skips assigned topics it does not
#: know. Peers read an assignment's partitions only: an entry without partitions gives them
#: nothing (Java's, librdkafka's, kafka-python's and franz-go's consumers, tested in mixed
#: groups). aiogroup 0.x leaders put the marks in the user data (space-separated); both are read.
MARK_PREFIX = "aiogroup:"


def announce_hand_off_aware(
    assignments: Mapping[str, Assignment], *, follow_up: bool = False
) -> dict[str, Assignment]:
    """Mark a cooperative leader's assignments with :data:`HAND_OFF_AWARE`, so members know
    this leader withholds for a hand-off, and with :data:`FOLLOW_UP` when it withheld
    partitions in this round (see :data:`MARK_PREFIX` for where marks go)."""
    marks = (HAND_OFF_AWARE, FOLLOW_UP) if follow_up else (HAND_OFF_AWARE,)
    entries: dict[str, tuple[int, ...]] = {m.decode(): () for m in marks}
    return {
        m: dataclasses.replace(a, partitions={**a.partitions, **entries})
        for m, a in assignments.items()
    }


def leader_marks(assignment: Assignment) -> frozenset[bytes]:
    """The marks an aiogroup leader put in ``assignment`` (each ``aiogroup:<name>/<version>``;
    marks a later version adds are ignored by whoever does not know them), or none."""
    marks = [t.encode() for t in assignment.partitions if t.startswith(MARK_PREFIX)]
    user_data = assignment.user_data
    if user_data and user_data.startswith(MARK_PREFIX.encode()):
        marks.extend(user_data.split(b" "))  # an aiogroup 0.x leader's
    return frozenset(marks)


def without_marks(assignment: Assignment) -> Assignment:
    """``assignment`` as its assignor made it: the leader's marks taken out."""
    partitions = assignment.partitions
    user_data = assignment.user_data
    legacy = user_data is not None and user_data.startswith(MARK_PREFIX.encode())
    if not legacy and not any(t.startswith(MARK_PREFIX) for t in partitions):
        return assignment
    return dataclasses.replace(
        assignment,
        partitions={t: ps for t, ps in partitions.items() if not t.startswith(MARK_PREFIX)},
        user_data=None if legacy else user_data,
    )


@dataclass(slots=True)
class LeaderRound:
    """What the leader remembers of the last round it led, while partitions in it went to
    nobody because a member still claimed them (KIP-429 2d). See ``docs/safety.md``."""

    generation_id: int
    #: Claimed partitions that nobody was assigned, and who claimed each.
    claimants: dict[TopicPartition, frozenset[str]]
    #: Some claim on them was already there, unhonoured, in the round before (same claimant).
    persisting: bool
    #: When the leader's SyncGroup was answered: the group was Stable at this generation.
    stable_at: float | None = None
    #: Send time of the latest heartbeat of this generation answered NONE: still Stable then.
    proven_until: float | None = None
    followed_up: bool = False


class Leadership:
    """What a member knows as its group's leader, round to round.

    ``handover_wait``: how long a leader waits for withheld partitions to be freed before it
    rebalances (the session timeout). ``receipt_wait``: how long a generation must stay Stable
    before every member still in it has surely received its assignment (a member that does not
    sync or heartbeat is expired within its session timeout; one that does not sync within the
    rebalance timeout, KAFKA-12890): the larger of the session and rebalance timeouts. Seconds.
    """

    __slots__ = (
        "group_topics",
        "handover_wait",
        "last_plan",
        "members",
        "rack_snapshot",
        "receipt_wait",
        "round",
        "snapshot",
        "stale_claims",
        "subscriptions",
        "undecodable_members",
    )

    def __init__(self, *, handover_wait: float, receipt_wait: float) -> None:
        self.handover_wait = handover_wait
        self.receipt_wait = receipt_wait
        #: The members of the JoinGroup answer being assigned.
        self.members: Sequence[JoinGroupMember] = ()
        #: Their decoded subscriptions (the undecodable ones left out).
        self.subscriptions: dict[str, Subscription] = {}
        #: Every topic some member subscribes to.
        self.group_topics: frozenset[str] = frozenset()
        #: The partition counts the last round assigned from (a change means rejoin, 1b).
        self.snapshot: dict[str, int] | None = None
        #: The replica racks of those partitions, when that round had racks (KIP-881): a
        #: change means rejoin too, as Java's leader does (KAFKA-14867).
        self.rack_snapshot: dict[str, Sequence[frozenset[str]]] | None = None
        #: The leader's view of its last assignment round (KIP-429 2a-2c), for logs and tests.
        self.last_plan: LeaderPlan | None = None
        #: Members whose metadata the leader could not decode in its last round.
        self.undecodable_members: frozenset[str] = frozenset()
        #: Claims the leader ignored in its last round: a member kept claiming partitions it
        #: had not been assigned in the previous round, which it must have received
        #: (``docs/safety.md``, "withheld partitions are always given out").
        self.stale_claims: dict[str, frozenset[TopicPartition]] = {}
        #: The last round led, while it withheld claimed partitions.
        self.round: LeaderRound | None = None

    # -- a round -----------------------------------------------------------------------------------

    def joined(self, members: Sequence[JoinGroupMember]) -> frozenset[str]:
        """Take the members of a JoinGroup answer (we lead); return every topic they subscribe
        to, which the metadata must cover before :meth:`plan`."""
        self.members = members
        subscriptions: dict[str, Subscription] = {}
        bad: set[str] = set()
        for member in members:
            try:
                subscription = decode_subscription(member.metadata)
            except AiogroupError as exc:
                # One member's garbage must not stop the group: it gets nothing this round.
                log.warning("member %s sent undecodable metadata: %s", member.member_id, exc)
                bad.add(member.member_id)
                continue
            if member.group_instance_id is not None:
                # KIP-345: range and roundrobin order static members by their instance id, as
                # Java's leader does (the JoinGroup answer carries it; the metadata does not).
                subscription = dataclasses.replace(
                    subscription, group_instance_id=member.group_instance_id
                )
            subscriptions[member.member_id] = subscription
        self.subscriptions = subscriptions
        self.undecodable_members = frozenset(bad)
        # One C-level union: a large group's members list a million topics in all.
        self.group_topics = frozenset().union(*(s.topics for s in subscriptions.values()))
        return self.group_topics

    @property
    def racked(self) -> bool:
        """Whether some member of the round has a rack (``rack_id``, KIP-881): only then does
        the assignment want the partitions' replica racks."""
        return any(s.rack_id for s in self.subscriptions.values())

    def follower(self) -> None:
        """We do not lead this generation: nothing of a round to remember."""
        self.group_topics = frozenset()
        self.snapshot = None
        self.rack_snapshot = None
        self.round = None

    def plan(
        self,
        assignor: PartitionAssignor,
        generation_id: int,
        metadata: Mapping[str, int],
        *,
        cooperative: bool,
        partition_racks: PartitionRacks | None = None,
    ) -> tuple[tuple[str, bytes], ...]:
        """KIP-429 2a-2f: the SyncGroup assignments of the round :meth:`joined` took,
        ``(member id, Assignment bytes)`` for every member, sorted by member id.

        Raises whatever the assignor raises (it is user code); the round is then not
        remembered as planned (:attr:`last_plan` and :attr:`snapshot` keep the last one).
        """
        claimed = self.subscriptions
        self.stale_claims = self._stale_claims(claimed, generation_id)
        subscriptions = claimed
        if self.stale_claims:
            log.warning(
                "leader: ignoring claims on partitions withheld since generation %d that their "
                "claimants were not assigned and must have revoked: %s",
                generation_id - 1,
                {m: sorted(tps) for m, tps in self.stale_claims.items()},
            )
            subscriptions = drop_claims(claimed, self.stale_claims)
        # (Dropping claims keeps the topics: the union joined() took is the group's.)
        partitions_per_topic = {t: metadata[t] for t in sorted(self.group_topics) if t in metadata}
        all_members = sorted({m.member_id for m in self.members})
        # KIP-881: the racks of the partitions' replicas, when some member has a rack (the
        # driver fetches them only then); run_assignor hands them to assign_partitions.
        racks = partition_racks if partition_racks is not None and self.racked else None
        raw = run_assignor(assignor, partitions_per_topic, subscriptions, racks)
        assignments = {m: raw.get(m, Assignment()) for m in all_members}
        assignments, plan = leader_plan(
            assignments, subscriptions, partitions_per_topic, cooperative=cooperative
        )
        if cooperative:
            self._remember(generation_id, assignments, claimed, partitions_per_topic)
            follow_up = len(all_members) <= FOLLOW_UP_MAX_MEMBERS and self.follow_up_coming(
                generation_id
            )
            assignments = announce_hand_off_aware(assignments, follow_up=follow_up)
        encoded = tuple(
            (
                m,
                encode_assignment(
                    assignments[m],
                    min(3, subscriptions[m].version) if m in subscriptions else 0,
                ),
            )
            for m in all_members
        )
        self.last_plan = plan
        self.snapshot = partitions_per_topic
        self.rack_snapshot = (
            None if racks is None else {t: racks[t] for t in partitions_per_topic if t in racks}
        )
        return encoded

    def partitions_changed(self, metadata: Mapping[str, int]) -> bool:
        """The partitions of the group's topics differ from those the last round assigned."""
        if self.snapshot is None:
            return False
        now_snapshot = {t: metadata[t] for t in self.group_topics if t in metadata}
        return now_snapshot != self.snapshot

    def racks_changed(self, partition_racks: PartitionRacks | None) -> bool:
        """The replica racks of a partition the last round assigned with racks differ in
        ``partition_racks`` (a metadata answer that carries racks; one without says nothing).
        Java's leader rejoins then (KIP-881, KAFKA-14867: its metadata snapshot holds each
        partition's replica racks); a partition count change is :meth:`partitions_changed`."""
        before = self.rack_snapshot
        if before is None or partition_racks is None:
            return False
        for topic, racks in before.items():
            now = partition_racks.get(topic)
            if now is not None and len(now) == len(racks) and tuple(now) != tuple(racks):
                return True
        return False

    # -- withheld partitions are always given out (docs/safety.md) ---------------------------------

    def _remember(
        self,
        generation_id: int,
        assignments: Mapping[str, Assignment],
        subscriptions: Mapping[str, Subscription],
        partitions_per_topic: Mapping[str, int],
    ) -> None:
        withheld = claimants(
            subscriptions, unassigned_partitions(assignments, partitions_per_topic)
        )
        if not withheld:
            self.round = None
            return
        prev = self.round
        persisting = (
            prev is not None
            and prev.generation_id + 1 == generation_id
            and any(
                members & prev.claimants.get(tp, frozenset()) for tp, members in withheld.items()
            )
        )
        self.round = LeaderRound(generation_id, withheld, persisting)

    def _stale_claims(
        self, subscriptions: Mapping[str, Subscription], generation_id: int
    ) -> dict[str, frozenset[TopicPartition]]:
        """Claims to ignore this round: partitions nobody was assigned in the previous round
        (which we led) because of a member's claim, claimed again by that same member.

        That round was Stable for at least ``receipt_wait`` (a heartbeat answered NONE says
        so), so the member, still in the group under the same id, received its assignment,
        which did not contain them: a member following KIP-429 would have revoked them before
        rejoining. kafka-python 3.0.12's cooperative assignor keeps claiming what it lost.
        """
        prev = self.round
        if (
            prev is None
            or prev.generation_id + 1 != generation_id
            or prev.stable_at is None
            or prev.proven_until is None
            or prev.proven_until < prev.stable_at + self.receipt_wait
        ):
            return {}
        stale: dict[str, set[TopicPartition]] = {}
        for tp, members in claimants(subscriptions, frozenset(prev.claimants)).items():
            for member_id in members & prev.claimants[tp]:
                stale.setdefault(member_id, set()).add(tp)
        return {m: frozenset(tps) for m, tps in sorted(stale.items())}

    def follow_up_coming(self, generation_id: int) -> bool:
        """The round just planned withheld partitions whose owner rejoins once it revoked
        them: not when a claim on them persists, which may not end soon (see
        :meth:`follow_up_due`)."""
        r = self.round
        return r is not None and r.generation_id == generation_id and not r.persisting

    def synced(self, generation_id: int, now: float) -> None:
        """Our (the leader's) SyncGroup completed the round: the group is Stable from now."""
        if self.round is not None and self.round.generation_id == generation_id:
            self.round.stable_at = now

    def heartbeat_ok(self, generation_id: int, sent_at: float) -> bool:
        """A heartbeat sent at ``sent_at`` was answered NONE: the group was Stable when it was
        handled. True if that matters to a round withholding partitions (then see
        :meth:`follow_up_due`)."""
        r = self.round
        if r is not None and r.generation_id == generation_id and r.stable_at is not None:
            r.proven_until = sent_at
            return True
        return False

    def forget(self) -> None:
        """The generation is over for us: no round of ours to follow up, no assignment of
        ours whose partitions may change."""
        self.round = None
        self.snapshot = None
        self.rack_snapshot = None

    def _round_to_follow_up(self, generation_id: int) -> LeaderRound | None:
        """Our last round as leader, if a follow-up rebalance for it may still be needed.
        (The caller passes the generation only while it leads it and is Stable.)"""
        r = self.round
        if r is None or r.followed_up or r.stable_at is None or r.generation_id != generation_id:
            return None
        return r

    def follow_up_deadline(self, generation_id: int) -> float | None:
        """When :meth:`follow_up_due` may next say yes by itself (``None``: not by time)."""
        r = self._round_to_follow_up(generation_id)
        if r is None or r.stable_at is None or r.persisting:
            return None  # persisting: decided by heartbeat answers, see follow_up_due
        return r.stable_at + self.handover_wait

    def follow_up_due(self, generation_id: int, now: float) -> bool:
        """Rebalance now (once) if partitions withheld in our last round may still be with
        nobody.

        Their previous owner was to revoke them and rejoin; if it did not (a static member
        restarted in between and got its cached assignment back, a peer that never revokes,
        ...), no rebalance ever comes and the group stays Stable with partitions nobody owns.
        A leader's rejoin always makes the coordinator rebalance. When a claim on them had
        already gone unhonoured in the round before, wait until this generation has been
        Stable long enough that the next round may ignore such a claim (see _stale_claims).
        """
        r = self._round_to_follow_up(generation_id)
        if r is None or r.stable_at is None:
            return False
        if r.persisting:
            due = r.proven_until is not None and r.proven_until >= r.stable_at + self.receipt_wait
        else:
            due = now >= r.stable_at + self.handover_wait
        if not due:
            return False
        r.followed_up = True
        log.info(
            "leader: %d partition(s) withheld in generation %d may still be unowned "
            "(%s); rebalancing so that they are handed over",
            len(r.claimants),
            r.generation_id,
            "claimed again" if r.persisting else "no rebalance since",
        )
        return True
