"""Buffers: on-policy rollouts (:mod:`.rollout`), TBB replay (:mod:`.tape`), SBB replay (:mod:`.segment`).

``TapeReplay`` and ``SegmentReplay`` share ``init(example)``, ``add(state, transitions, begin)``,
``sample(state, key, batch_size)`` and ``can_sample(state)``, so an agent picks one by config
with :func:`make_replay`.
"""

from __future__ import annotations

from typing import Any


def make_replay(kind: str, capacity: int, segment_length: int | None = None) -> Any:
    """``"tape"`` (TBB, ``capacity`` transitions) or ``"segment"`` (SBB, ``capacity // segment_length`` rows).

    Raises ``ValueError`` for an unknown ``kind``, a ``capacity`` below 1, a missing or
    non-positive ``segment_length`` (SBB), or an SBB ``capacity`` smaller than one segment.
    """
    from memgym.buffers.segment import SegmentReplay
    from memgym.buffers.tape import TapeReplay

    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, got capacity={capacity!r}")
    if kind == "tape":
        return TapeReplay(capacity)
    if kind == "segment":
        if segment_length is None:
            raise ValueError("segment_length is required for kind='segment'")
        if isinstance(segment_length, bool) or not isinstance(segment_length, int) or segment_length < 1:
            raise ValueError(f"segment_length must be a positive integer, got segment_length={segment_length!r}")
        if capacity < segment_length:
            raise ValueError(
                f"capacity={capacity} is smaller than one segment of segment_length={segment_length} "
                "(SBB stores capacity // segment_length rows)"
            )
        return SegmentReplay(capacity // segment_length, segment_length)
    raise ValueError(f"kind must be 'tape' or 'segment', got kind={kind!r}")
