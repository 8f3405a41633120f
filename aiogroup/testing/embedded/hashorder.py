"""The iteration order of the hash maps Kafka's group coordinators keep their members in.

Kafka never sorts a group's members: the member list in the leader's JoinGroup answer, the next
leader when the leader leaves (the first key), the first rejoined member that becomes leader and
the tie-break of the protocol vote all follow the iteration order of a hash map, which differs
between Kafka versions because the map implementation did:

* Kafka 2.x (``GroupMetadata.scala``, Scala 2.12): ``scala.collection.mutable.HashMap``
  (``HashTable``), :class:`Scala212Map`; the vote groups with ``groupBy``, which gives an
  insertion-ordered ``Map1..Map4`` (else a 2.12 ``immutable.HashMap`` trie);
* Kafka 3.x (the same Scala coordinator, built with Scala 2.13): the 2.13 rewrite of
  ``mutable.HashMap``, :class:`Scala213Map`; ``groupBy`` gives a CHAMP ``immutable.HashMap``;
* Kafka 4.x (``ClassicGroup.java``): ``java.util.HashMap``, :class:`JavaMap`; the vote counts
  in another ``HashMap``.

Each model below reproduces the bucket layout, growth and in-bucket order of the real
implementation, so the order depends on the whole put/remove history as it does there (for
example a Java map never shrinks after a resize). The vectors in ``tests/testing/data`` were
produced by the real ``java.util.HashMap`` and the Scala 2.12.8 / 2.13 libraries
(``tests/testing/data/HashOrder.java``); the models are tested against them. Pure computation:
no I/O. Not modelled (documented): Java's tree bins (9+ keys in one bucket of a table of 64 or
more) and the order among keys whose full hash codes are equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

__all__ = [
    "FLAVOUR_MAPS",
    "JavaMap",
    "KeyOrder",
    "Scala212Map",
    "Scala213Map",
    "java_string_hash",
    "vote_order",
]

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units) as an unsigned 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _mul(a: int, b: int) -> int:
    return (a * b) & _MASK


def _reverse_bytes(h: int) -> int:
    return int.from_bytes(h.to_bytes(4, "big"), "little")


def _rotate_right(h: int, n: int) -> int:
    n %= 32
    return ((h >> n) | (h << (32 - n))) & _MASK if n else h


def _immutable_improve(h: int) -> int:
    """``scala.collection.Hashing.improve`` (the immutable maps of 2.12 and 2.13)."""
    h = (h + (~(h << 9) & _MASK)) & _MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK
    return h ^ (h >> 10)


class KeyOrder:
    """A set of string keys that iterates in the order of one map implementation.

    ``put`` adds a key (a key already present keeps its place, as a map update does);
    ``remove`` drops one. Iteration, ``len`` and ``in`` behave like the real map's key set.
    """

    name: ClassVar[str] = ""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._size = 0
        self._members: set[str] = set()
        for key in keys:
            self.put(key)

    def put(self, key: str) -> None:
        raise NotImplementedError

    def remove(self, key: str) -> None:
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class JavaMap(KeyOrder):
    """``java.util.HashMap<String, V>``: bucket ``spread(hash) & (n - 1)``, new keys appended to
    their bucket, doubling once the size exceeds 3/4 of the table (the split keeps each
    bucket's order), and a doubling instead of a tree bin while the table is under 64."""

    name = "java.util.HashMap"

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._table: list[list[str]] = [[] for _ in range(16)]
        super().__init__(keys)

    @staticmethod
    def _hash(key: str) -> int:
        h = java_string_hash(key)
        return h ^ (h >> 16)

    def put(self, key: str) -> None:
        if key in self._members:
            return
        bucket = self._table[self._hash(key) & (len(self._table) - 1)]
        bucket.append(key)
        self._members.add(key)
        if len(bucket) > 8 and len(self._table) < 64:
            self._resize()  # treeifyBin on a small table resizes instead
        if len(self._members) > len(self._table) * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        old = self._table
        size = len(old)
        self._table = [[] for _ in range(size * 2)]
        for i, bucket in enumerate(old):
            for key in bucket:
                high = self._hash(key) & size
                self._table[i + size if high else i].append(key)

    def remove(self, key: str) -> None:
        if key in self._members:
            self._members.discard(key)
            self._table[self._hash(key) & (len(self._table) - 1)].remove(key)

    def __iter__(self) -> Iterator[str]:
        return iter([key for bucket in self._table for key in bucket])


class Scala212Map(KeyOrder):
    """Scala 2.12 ``mutable.HashMap`` (``HashTable``): bucket from the *top* bits of
    ``rotateRight(byteswap32(hash), seed)`` with the seed fixed at the initial table's
    ``bitCount(15)`` = 4, new keys pushed at the head of their bucket, doubling when the size
    exceeds 3/4 of the table (rehashed from the last bucket down), iterated from the last
    bucket down to the first."""

    name = "scala 2.12 mutable.HashMap"
    _SEED = 4

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._table: list[list[str]] = [[] for _ in range(16)]
        super().__init__(keys)

    def _index(self, key: str) -> int:
        h = java_string_hash(key)
        h = _mul(_reverse_bytes(_mul(h, 0x9E3775CD)), 0x9E3775CD)  # byteswap32
        improved = _rotate_right(h, self._SEED)
        ones = len(self._table) - 1
        exponent = 32 - ones.bit_length()  # Integer.numberOfLeadingZeros(ones)
        return (improved >> exponent) & ones

    def put(self, key: str) -> None:
        if key in self._members:
            return
        self._table[self._index(key)].insert(0, key)
        self._members.add(key)
        if len(self._members) > len(self._table) * 750 // 1000:
            old = self._table
            self._table = [[] for _ in range(len(old) * 2)]
            for bucket in reversed(old):
                for k in bucket:
                    self._table[self._index(k)].insert(0, k)

    def remove(self, key: str) -> None:
        if key in self._members:
            self._members.discard(key)
            self._table[self._index(key)].remove(key)

    def __iter__(self) -> Iterator[str]:
        return iter([key for bucket in reversed(self._table) for key in bucket])


class Scala213Map(KeyOrder):
    """Scala 2.13 ``mutable.HashMap``: bucket ``(hash ^ hash >>> 16) & (n - 1)``, each bucket
    sorted by that improved hash (as a signed int, a new key after equal ones), doubling
    *before* a put once ``size + 1`` reaches 3/4 of the table, iterated bucket by bucket."""

    name = "scala 2.13 mutable.HashMap"

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._table: list[list[tuple[int, str]]] = [[] for _ in range(16)]
        super().__init__(keys)

    @staticmethod
    def _hash(key: str) -> int:
        h = java_string_hash(key)
        return _signed(h ^ (h >> 16))

    def put(self, key: str) -> None:
        if len(self._members) + 1 >= int(len(self._table) * 0.75):
            self._grow()
        if key in self._members:
            return
        h = self._hash(key)
        bucket = self._table[h & (len(self._table) - 1)]
        at = len(bucket)
        for i, (other, _) in enumerate(bucket):
            if other > h:
                at = i
                break
        bucket.insert(at, (h, key))
        self._members.add(key)

    def _grow(self) -> None:
        old = self._table
        size = len(old)
        self._table = [[] for _ in range(size * 2)]
        for i, bucket in enumerate(old):
            for h, key in bucket:
                self._table[i + size if h & size else i].append((h, key))

    def remove(self, key: str) -> None:
        if key in self._members:
            self._members.discard(key)
            h = self._hash(key)
            self._table[h & (len(self._table) - 1)].remove((h, key))

    def __iter__(self) -> Iterator[str]:
        return iter([key for bucket in self._table for _, key in bucket])


def _scala212_trie_order(keys: Sequence[str]) -> list[str]:
    """Scala 2.12 ``immutable.HashMap`` (a hash trie): ordered by the 5-bit fragments of the
    improved hash, lowest fragment first."""

    def fragments(key: str) -> tuple[int, ...]:
        h = _immutable_improve(java_string_hash(key))
        return tuple((h >> shift) & 31 for shift in range(0, 35, 5))

    return sorted(keys, key=fragments)  # stable: equal hashes keep their insertion order


def _champ_order(keys: Sequence[str], shift: int = 0) -> list[str]:
    """Scala 2.13 ``immutable.HashMap`` (CHAMP): at each node the keys stored inline come first
    (by fragment), then each sub-node's keys (by fragment), depth first."""
    if shift >= 35:
        return list(keys)
    by_fragment: dict[int, list[str]] = {}
    for key in keys:
        h = _immutable_improve(java_string_hash(key))
        by_fragment.setdefault((h >> shift) & 31, []).append(key)
    inline = [group[0] for _, group in sorted(by_fragment.items()) if len(group) == 1]
    nested = [
        key
        for _, group in sorted(by_fragment.items())
        if len(group) > 1
        for key in _champ_order(group, shift + 5)
    ]
    return inline + nested


def vote_order(flavour: str, votes: Sequence[str]) -> list[str]:
    """The distinct protocol names of ``votes`` (one per member, in member order) in the order
    the ``flavour``'s ``selectProtocol`` scans them for the most votes (the first maximum wins
    in every version).

    * ``kafka2``: ``votes.groupBy(identity)`` in Scala 2.12: a mutable ``HashMap`` of the
      votes, copied into ``Map1``..``Map4`` (insertion ordered) or a hash trie for 5+ names;
    * ``kafka3``: the same ``groupBy`` in Scala 2.13, which always builds a CHAMP map;
    * ``kafka4``: a ``java.util.HashMap`` filled in member order, then ``stream().max``.
    """
    if flavour == "kafka2":
        names = list(Scala212Map(votes))
        return names if len(names) <= 4 else _scala212_trie_order(names)
    if flavour == "kafka3":
        return _champ_order(list(Scala213Map(votes)))
    if flavour == "kafka4":
        return list(JavaMap(votes))
    raise ValueError(f"unknown flavour {flavour!r}")


#: The member map of each coordinator flavour.
FLAVOUR_MAPS: dict[str, type[KeyOrder]] = {
    "kafka2": Scala212Map,
    "kafka3": Scala213Map,
    "kafka4": JavaMap,
}
