"""The sticky balancer shared by ``sticky`` and ``cooperative-sticky``: plain inputs in, a plan out.

The balancer knows nothing about user data, protocol versions or rebalance protocols. It takes,
per member, the topics it subscribes to, the partitions it claims to own and the generation of
that claim (:class:`MemberClaim`), and returns a :class:`Plan`: per member the partitions it keeps
and the partitions it is newly given. ``cooperative-sticky`` then runs its own adjust step on the
plan (:mod:`aiogroup.assignors._cooperative`), composition rather than subclassing, as franz-go
does.

Representation (the reason it is fast): every partition is an ``int``, ``offset[topic] +
partition`` with topics in sorted order ("topic-major"), and members are list indices in sorted
member-id order. No per-partition Python object is built; most of the per-partition work is done
by C-level builtins (``map``, ``set``, ``sorted``, slicing, ``dict(zip(...))``).

Rules, with where they come from:

- Ownership claims are resolved per partition (KIP-341, KAFKA-7026, KAFKA-12984, KAFKA-14639):
  a sole claimant keeps its claim; among several, the highest generation wins; at equal highest
  generations nobody keeps the partition this round.
- Bad claims never crash the leader (franz-go's negative-partition panic): a partition that does
  not exist, a negative one, a topic the member is not subscribed to, or a partition listed twice
  by one member are dropped with a warning on the ``aiogroup.assignors`` logger.
- Uniform subscriptions take a quota path: ``N // M`` each and ``N % M`` members one more; the
  one-more slots go first to members that already own more than ``N // M`` (fewest moves).
- Unequal subscriptions take a general path: keep, fill the least loaded eligible member (most
  constrained topics first), then move partitions until no partition could move to an eligible
  member with 2+ fewer. Newly given partitions move before owned ones, and before revoking an
  owned partition the balancer looks for a chain of newly given partitions that fixes the same
  imbalance. That keeps the plan sticky and is what lets a cooperative group converge within
  two rebalances (KIP-429): the second round finds a balanced completion of what members kept.
  Donors are taken heaviest first (a max-heap), and a final step takes back detours: cycles and
  paths of moves with a negative net move count that keep the plan as balanced
  (:mod:`~aiogroup.assignors.balancer.detours`).
- Partitions handed out are ordered by partition, then topic (KAFKA-16277), so one member does
  not get a whole topic while another gets another topic.
- Deterministic (KAFKA-12898): members and topics are sorted first, so input order is irrelevant.

The parts, one module each (as franz-go keeps its balancer in ``sticky.go`` and ``graph.go``):

- :mod:`~aiogroup.assignors.balancer.layout`: :class:`MemberClaim`, :class:`Layout` (the
  integer ids), :class:`Plan`; each member's claim checked (``valid_ids``) and conflicts
  settled (``resolve``).
- :mod:`~aiogroup.assignors.balancer.claims`: the members' claims indexed per topic
  (:class:`ClaimIndex`, shared with the leader's KIP-429 plan).
- :mod:`~aiogroup.assignors.balancer.owned`: what each member validly owns, for the general
  path.
- :mod:`~aiogroup.assignors.balancer.uniform`: the equal-subscriptions path.
- :mod:`~aiogroup.assignors.balancer.fill`: the fill (water fill, the fresh group's fill and
  plan).
- :mod:`~aiogroup.assignors.balancer.held`: who holds what, grouped lazily per member.
- :mod:`~aiogroup.assignors.balancer.least`: the least loaded subscriber of a topic.
- :mod:`~aiogroup.assignors.balancer.general`: the general path (fill, then the moves of
  :class:`~aiogroup.assignors.balancer.general.Rebalance`).
- :mod:`~aiogroup.assignors.balancer.detours`: taking back detours.
- :mod:`~aiogroup.assignors.balancer.entry`: :func:`balance`, which picks the path.

Names without a leading underscore are used across these modules; the ones listed in
``__all__`` here are the package's API.
"""

from aiogroup.assignors.balancer.claims import ClaimIndex, last_index, shared_index
from aiogroup.assignors.balancer.entry import balance, gc_paused
from aiogroup.assignors.balancer.layout import Layout, MemberClaim, Plan

__all__ = [
    "ClaimIndex",
    "Layout",
    "MemberClaim",
    "Plan",
    "balance",
    "gc_paused",
    "last_index",
    "shared_index",
]
