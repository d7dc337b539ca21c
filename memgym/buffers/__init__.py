"""Buffers: on-policy rollouts (:mod:`.rollout`), TBB replay (:mod:`.tape`), SBB replay (:mod:`.segment`).

``TapeReplay`` and ``SegmentReplay`` share ``init(example)``, ``add(state, transitions, start)``,
``sample(state, key, batch_size)``, ``sample_stacked(states, key, batch_size)`` (one batch from
several replays stacked by ``jax.vmap``, e.g. one per environment) and ``can_sample(state)``,
so an agent picks one by config with :func:`make_replay` and never reads a replay's state.
Buffers only store and sample transitions; what is computed from them (returns, advantages,
losses) lives in :mod:`memgym.agents`.
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
    from memgym.validation import check_positive

    check_positive(capacity=capacity)
    if kind == "tape":
        return TapeReplay(capacity)
    if kind == "segment":
        if segment_length is None:
            raise ValueError("segment_length is required for kind='segment'")
        check_positive(segment_length=segment_length)
        if capacity < segment_length:
            raise ValueError(
                f"capacity={capacity} is smaller than one segment of segment_length={segment_length} "
                "(SBB stores capacity // segment_length rows)"
            )
        return SegmentReplay(capacity // segment_length, segment_length)
    raise ValueError(f"kind must be 'tape' or 'segment', got kind={kind!r}")
