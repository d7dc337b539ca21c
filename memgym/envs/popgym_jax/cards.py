"""popgym 1.0.7's card tasks as gymnax environments, step for step with popgym's NumPy ones.

Six tasks, each in popgym's three difficulties (the classes ``<Task>Easy`` / ``Medium`` /
``Hard``, built with no arguments but ``prev_action``) and in any setting popgym's own
constructor accepts (``RepeatPrevious(num_decks=2, k=8)``):

==================  ====================================================  =====================================
task                what the agent must do                                Easy / Medium / Hard
==================  ====================================================  =====================================
RepeatFirst         name the suit of the episode's first card, every step  1 / 8 / 16 decks
RepeatPrevious      name the suit of the card ``k`` cards back             1 deck k=4 / 2 decks k=32 / 3 decks k=64
CountRecall         say how often the queried kind of card has been dealt  colors 1 deck / suits 2 / ranks 4
Autoencode          watch the deck, then name its suits in reverse order   1 / 2 / 3 decks
HigherLower         guess whether the next card ranks higher or lower      1 / 2 / 3 decks
Concentration       turn cards two at a time to find matching pairs        colors 1 deck / colors 2 / ranks 1
==================  ====================================================  =====================================

Every task is a :class:`~memgym.envs.popgym_jax.common.PopGymJaxEnv`: the observation is
memgym's Gymnasium wrapper's (``memgym/popgym-<Task><Difficulty>-v0``: popgym's observation
flattened to float32 one-hot blocks, then the previous action one-hot, zeros after a reset),
and every step's ``info`` holds ``episode_return``, ``normalized_return`` and
``episode_length`` (the finished episode's where ``terminated | truncated``). Usage::

    env = RepeatPreviousMedium()
    params = env.default_params
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)  # gymnax 1.0

The deck
--------
A card is an integer ``c`` in ``[0, 52 * num_decks)`` with popgym's attributes: suit ``c % 4``,
colour ``c % 2``, rank ``(c % 52) // 4`` (ace first). Every episode plays a uniformly random
ordering of the whole deck, independent of the episodes before it: ``reset`` shuffles it with
``jax.random.permutation``; an episode gymnax's auto-reset starts plays the deck that has been
shuffled *during* the episode before, one Fisher-Yates swap per step (every card task's episode
lasts at least the ``num_cards - 1`` steps a shuffle needs; Concentration's at least
``num_cards``, a pair found every second step). A :class:`Decks` holds both orderings in one
array and says which one is in play, so an auto-reset only flips that index: under ``vmap`` an
auto-reset is computed at every step of every environment, and a permutation by sorting there,
or a copy of the deck, would cost many times the step itself. The tasks that deal (all but
Concentration) keep the deck in the order it is dealt (``task.decks.card(t)`` is the card shown
at step ``t``; popgym deals from the *end* of its ``Deck.idx``, so ``task.decks.deck`` is ``idx``
reversed); Concentration keeps popgym's layout (``task.decks.card(i)`` is the card lying at
position ``i``, popgym's ``idx``).

Parameters
----------
The number of decks and CountRecall's and Concentration's ``deck_type`` fix array shapes and
are constructor arguments; RepeatPrevious's ``k`` is traced (:class:`RepeatPreviousParams`,
built and checked by :meth:`RepeatPrevious.params`), so one compiled step serves every ``k``
and ``jax.vmap`` over params runs several side by side. ``max_steps_in_episode`` is the
episode's length (Concentration's: its time limit), for information.

Deviations from popgym
----------------------
None changes an observation, a reward (beyond its rounding to float32), an end flag or a score
of a valid action sequence.

====================================  ========================================  ==========================================
what                                  popgym 1.0.7                              here
====================================  ========================================  ==========================================
randomness                            NumPy's generator shuffles                ``jax.random.permutation`` at ``reset``;
                                      ``Deck.idx`` at each reset                a Fisher-Yates shuffle one swap a step
                                                                                for auto-reset episodes (same
                                                                                distribution: uniform, independent
                                                                                orderings; another stream)
rewards                               Python floats (float64)                   float32: popgym's reward rounded once
episode return                        ``math.fsum`` of the float64 rewards      ``rounded_ratio(score, d)`` from the
                                      (memgym's ``EpisodeReturn``)              integer score in units of ``1 / d``:
                                                                                popgym's return rounded to float32, to
                                                                                the bit (tested on every episode)
invalid actions (outside the space)   not checked: compared or indexed as       not checked (jit): compared as given
                                      given (memgym's wrapper raises            (a wrong answer); Concentration clamps
                                      ``ValueError``)                           the position; the previous-action block
                                                                                is all zeros
stepping after the episode's end      ``DeckEmptyError`` (memgym's wrapper      gymnax's ``step`` starts a new episode
                                      raises ``RuntimeError``)                  (``step_env`` alone steps on: the state
                                                                                is then meaningless)
``CountRecall(error_clamp=...)``      accepted, never used                      no such argument
CountRecall's ``info["counts"]``,     returned / kept                           not kept (nothing reads them)
``get_state()``, ``dealt_cards``,
HigherLower's reset info ``"card"``
invalid settings                      ``AssertionError`` or                     ``ValueError`` naming the argument
                                      ``NotImplementedError`` (none for
                                      ``k < 0``)
====================================  ========================================  ==========================================

Nothing of popgym's card tasks is left out. (MultiarmedBandit, Battleship and MineSweeper are
not card tasks and are not here.)
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from memgym.envs.popgym_jax.common import PopGymParams, PopGymState, ScoredTask, difficulty, one_hot
from memgym.validation import check_choice, check_int

__all__ = [
    "CARD_TASKS",
    "DECK_SIZE",
    "Autoencode",
    "AutoencodeEasy",
    "AutoencodeHard",
    "AutoencodeMedium",
    "CardTask",
    "Concentration",
    "ConcentrationEasy",
    "ConcentrationHard",
    "ConcentrationMedium",
    "ConcentrationState",
    "CountRecall",
    "CountRecallEasy",
    "CountRecallHard",
    "CountRecallMedium",
    "CountRecallState",
    "DeckState",
    "Decks",
    "HigherLower",
    "HigherLowerEasy",
    "HigherLowerHard",
    "HigherLowerMedium",
    "RepeatFirst",
    "RepeatFirstEasy",
    "RepeatFirstHard",
    "RepeatFirstMedium",
    "RepeatPrevious",
    "RepeatPreviousEasy",
    "RepeatPreviousHard",
    "RepeatPreviousMedium",
    "RepeatPreviousParams",
    "card_feature",
    "shuffle_step",
]

#: cards in one deck
DECK_SIZE = 52
NUM_SUITS, NUM_RANKS, NUM_COLORS = 4, 13, 2
#: the kinds of card a task can tell apart, with how many values each has
FEATURE_SIZES = {"colors": NUM_COLORS, "suits": NUM_SUITS, "ranks": NUM_RANKS}


def card_feature(cards: Any, feature: str) -> jax.Array:
    """``"suits"`` (0-3), ``"colors"`` (0-1) or ``"ranks"`` (0-12, ace first) of cards, as popgym's
    ``Deck`` numbers them (int32; ``cards`` an integer or an integer array)."""
    cards = jnp.asarray(cards, jnp.int32)
    if feature == "suits":
        return cards % NUM_SUITS
    if feature == "colors":
        return cards % NUM_COLORS
    if feature == "ranks":
        return (cards % DECK_SIZE) // NUM_SUITS
    raise ValueError(f"feature must be one of {', '.join(map(repr, FEATURE_SIZES))}, got feature={feature!r}")


def shuffle_step(key: jax.Array, cards: jax.Array, step: jax.Array, row: Any = None) -> jax.Array:
    """Step ``step`` of a Fisher-Yates shuffle of ``cards`` (of ``cards[row]`` when ``row`` is given):
    position ``step`` swapped with a uniformly drawn position in ``[step, n)``; nothing changes from
    ``step = n - 1`` on. Steps ``0 … n - 2`` applied in turn to any ordering give a uniformly random
    one, independent of the ordering they started from."""
    n = cards.shape[-1]
    here = jnp.minimum(jnp.asarray(step, jnp.int32), n - 1)
    there = jax.random.randint(key, (), here, n, dtype=jnp.int32)
    # One scatter of the two cards, each read by its own scalar gather: so written, XLA updates the deck
    # in place under vmap; two chained scatters, or one gather of both cards, make it copy the whole
    # deck at every step (measured: 5 to 10 times slower with 16 decks).
    if row is None:
        return cards.at[jnp.stack([here, there])].set(jnp.stack([cards[there], cards[here]]))
    row = jnp.asarray(row, jnp.int32)
    rows, columns = jnp.stack([row, row]), jnp.stack([here, there])
    return cards.at[rows, columns].set(jnp.stack([cards[row, there], cards[row, here]]))


@struct.dataclass
class Decks:
    """Two orderings of the cards (int32 card numbers, ``cards`` of shape ``(2, num_cards)``):
    ``cards[current]`` is this episode's deck, ``cards[1 - current]`` the next episode's, which
    :meth:`shuffle_step` shuffles one swap per step and :meth:`next_episode` brings into play
    (the array itself is kept, so an auto-reset costs nothing of the deck's size)."""

    cards: jax.Array
    current: jax.Array

    @classmethod
    def shuffled(cls, key: jax.Array, num_cards: int) -> Decks:
        """A uniformly random deck (``jax.random.permutation``), copied as the next one's start."""
        deck = jax.random.permutation(key, num_cards).astype(jnp.int32)
        return cls.holding(deck)

    @classmethod
    def holding(cls, deck: Any) -> Decks:
        """Decks with ``deck`` in play (and as the next episode's deck's starting order)."""
        deck = jnp.asarray(deck, jnp.int32)
        return cls(cards=jnp.stack([deck, deck]), current=jnp.zeros((), jnp.int32))

    @property
    def deck(self) -> jax.Array:
        """This episode's deck (all of it)."""
        return self.cards[self.current]

    def card(self, i: Any) -> jax.Array:
        """The ``i``-th card of this episode's deck."""
        return self.cards[self.current, i]

    def shuffle_step(self, key: jax.Array, step: jax.Array) -> Decks:
        """Step ``step`` of the shuffle of the next episode's deck (:func:`shuffle_step`)."""
        return self.replace(cards=shuffle_step(key, self.cards, step, row=1 - self.current))

    def next_episode(self) -> Decks:
        """The next episode's deck in play; this one's order is where the one after starts shuffling."""
        return self.replace(current=1 - self.current)


@struct.dataclass
class DeckState:
    """A dealing task's state: its :class:`Decks`, in the order they are dealt, and ``score``, the
    episode's rewards so far in units of ``1 / reward_denominator`` (int32)."""

    decks: Decks
    score: jax.Array


@struct.dataclass
class CountRecallState:
    """CountRecall's two piles (:class:`Decks`: the dealt cards and the queries, in dealing order),
    how often each kind of card has been dealt so far (int32, the current card included) and the
    score (as :class:`DeckState`'s)."""

    values: Decks
    queries: Decks
    counts: jax.Array
    score: jax.Array


@struct.dataclass
class ConcentrationState:
    """Concentration's table: ``decks.card(i)`` is the card at position ``i``; ``face_up`` the matched
    positions; ``pending`` the position turned first in an unfinished pair (-1: none);
    ``shown`` the positions the last observation shows (the matched ones and those just turned);
    the score (as :class:`DeckState`'s)."""

    decks: Decks
    face_up: jax.Array
    pending: jax.Array
    shown: jax.Array
    score: jax.Array


@struct.dataclass
class RepeatPreviousParams(PopGymParams):
    """RepeatPrevious's params: ``k`` (int32, traced) is how many cards back the answer lies."""

    k: Any = 4


def _no_score() -> jax.Array:
    return jnp.zeros((), jnp.int32)


class CardTask(ScoredTask):
    """A task played with ``num_decks`` shuffled 52-card decks (see the module docstring); its rewards are
    integer multiples of ``1 / reward_denominator(params)`` (:class:`~memgym.envs.popgym_jax.common.ScoredTask`).
    """

    def __init__(self, num_decks: int = 1, prev_action: bool = True):
        super().__init__(prev_action=prev_action)
        self.num_decks = check_int("num_decks", num_decks, low=1)
        self.num_cards = DECK_SIZE * self.num_decks

    @property
    def name(self) -> str:
        return type(self).__name__

    def dealt(self, decks: Decks) -> DeckState:
        """A dealing task's state at the start of an episode played with ``decks``."""
        return DeckState(decks=decks, score=_no_score())

    def _shuffle_next(self, key: jax.Array, state: PopGymState) -> Any:
        """The task state with this step's swap of the next episode's deck (``DeckState``-like tasks).

        A step swaps first and reads this episode's cards from the decks it returns: with no read of
        the decks from before the swap, XLA swaps in place instead of copying both decks."""
        return state.task.replace(decks=state.task.decks.shuffle_step(key, state.time))

    def _params(self, **fields: Any) -> PopGymParams:
        return PopGymParams(max_steps_in_episode=self.num_cards - 1, **fields)

    @property
    def default_params(self) -> PopGymParams:
        return self._params()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_decks={self.num_decks}, prev_action={self.prev_action})"


class _DealingTask(CardTask):
    """A task that deals one deck, a card a step (all but CountRecall and Concentration)."""

    def init_task(self, key, params):
        return self.dealt(Decks.shuffled(key, self.num_cards))

    def next_task(self, key, state, params):
        return self.dealt(state.task.decks.next_episode())


class _SuitOfDealtCard(_DealingTask):
    """Shared by RepeatFirst and RepeatPrevious: the observation is the suit of the card just dealt,
    the action a suit, and the episode ends when the last card is dealt (``num_cards - 1`` steps)."""

    def observe_task(self, state, params):
        return one_hot(card_feature(state.task.decks.card(state.time), "suits"), NUM_SUITS)

    def task_observation_bounds(self, params):
        return np.zeros(NUM_SUITS, np.float32), np.ones(NUM_SUITS, np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(NUM_SUITS)

    def _last_deal(self, state: PopGymState) -> jax.Array:
        return state.time + 1 == self.num_cards - 1


def _right_or_wrong(right: jax.Array) -> jax.Array:
    """+1 unit for a right answer, -1 for a wrong one (int32)."""
    return jnp.where(right, 1, -1).astype(jnp.int32)


class RepeatFirst(_SuitOfDealtCard):
    """Name the first card's suit at every step: ``±1 / (num_cards - 1)`` a step, ``num_cards - 1`` steps.

    Args:
        num_decks: decks shuffled together (an integer >= 1; popgym's Easy / Medium / Hard: 1 / 8 / 16).
        prev_action: append the previous action to the observation.
    """

    def reward_denominator(self, task, params):
        return self.num_cards - 1

    def play(self, key, state, action, params):
        task = self._shuffle_next(key, state)
        first_suit = card_feature(task.decks.card(0), "suits")
        return task, _right_or_wrong(jnp.asarray(action) == first_suit), self._last_deal(state), jnp.zeros((), bool)


class RepeatPrevious(_SuitOfDealtCard):
    """Name the suit of the card ``k`` cards back (``k = 1``: the card showing).

    Step ``t`` (the ``t``-th card showing, the first at ``t = 0``) scores ``±1 / (num_cards - k)`` from
    ``t = k - 1`` on, by the suit of the ``(t + 1 - k)``-th card, as popgym compares with its hand's
    ``k``-th card from the end; ``k = 0`` compares with the first card from the first step on (popgym's
    ``hand[-0]``). The episode is ``num_cards - 1`` steps long.

    Args:
        num_decks: decks shuffled together (an integer >= 1).
        k: how far back, an integer in ``[0, 52 * num_decks - 1]`` (the default params' value; it is
            traced: :meth:`params` builds others). popgym's Easy / Medium / Hard: 1 deck ``k=4`` / 2 decks
            ``k=32`` / 3 decks ``k=64``.
        prev_action: append the previous action to the observation.
    """

    def __init__(self, num_decks: int = 1, k: int = 4, prev_action: bool = True):
        super().__init__(num_decks=num_decks, prev_action=prev_action)
        self._default_params = self.params(k)

    def params(self, k: Any) -> RepeatPreviousParams:
        """Checked :class:`RepeatPreviousParams` for ``k`` (an integer, or an integer array: a batch for
        ``jax.vmap``; each in ``[0, num_cards - 1]``, as popgym requires ``num_cards > k``)."""
        values = np.asarray(k)
        if not np.issubdtype(values.dtype, np.integer) or values.dtype == bool:
            raise ValueError(f"k must be an integer or an integer array, got k={k!r}")
        for value in values.reshape(-1):
            check_int("k", int(value), 0, self.num_cards - 1,
                      why=f"cards back, fewer than the {self.num_cards} cards of {self.num_decks} deck(s)")
        if values.ndim == 0:  # one environment: Python ints, hashable as gymnax's own params are
            return RepeatPreviousParams(max_steps_in_episode=self.num_cards - 1, k=int(values))
        steps = np.broadcast_to(np.int32(self.num_cards - 1), values.shape)
        return RepeatPreviousParams(max_steps_in_episode=jnp.asarray(steps), k=jnp.asarray(values, jnp.int32))

    @property
    def default_params(self) -> RepeatPreviousParams:
        return self._default_params

    def reward_denominator(self, task, params):
        return self.num_cards - jnp.asarray(params.k, jnp.int32)

    def play(self, key, state, action, params):
        task = self._shuffle_next(key, state)
        k = jnp.asarray(params.k, jnp.int32)
        held = state.time + 1  # cards in popgym's hand before this step's deal
        target = task.decks.card(jnp.where(k == 0, 0, held - k))
        answer = _right_or_wrong(jnp.asarray(action) == card_feature(target, "suits"))
        units = jnp.where(held >= k, answer, 0)
        return task, units, self._last_deal(state), jnp.zeros((), bool)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_decks={self.num_decks}, k={int(self._default_params.k)}, " \
               f"prev_action={self.prev_action})"


class CountRecall(CardTask):
    """Say how many cards of the queried kind have been dealt so far.

    Two decks are shuffled: one deals the cards, the other the queries. The observation is the kind
    (``deck_type``: colour, suit or rank) of the card dealt and of the card queried, one-hot each;
    the answer at the next step is how many cards of the queried kind have been dealt (the one just
    dealt included): ``±1 / (num_cards - 1)``, ``num_cards - 1`` steps. Actions:
    ``0 … num_cards / kinds``.

    Args:
        num_decks: decks in each of the two piles (an integer >= 1).
        deck_type: ``"colors"``, ``"suits"`` or ``"ranks"``. popgym's Easy / Medium / Hard: colors with
            1 deck / suits with 2 / ranks with 4.
        prev_action: append the previous action to the observation.
    """

    def __init__(self, num_decks: int = 1, deck_type: str = "colors", prev_action: bool = True):
        super().__init__(num_decks=num_decks, prev_action=prev_action)
        self.deck_type = check_choice("deck_type", deck_type, tuple(FEATURE_SIZES))
        self.num_kinds = FEATURE_SIZES[deck_type]
        self.max_count = self.num_cards // self.num_kinds

    def init_task(self, key, params):
        value_key, query_key = jax.random.split(key)
        return self.deal(Decks.shuffled(value_key, self.num_cards), Decks.shuffled(query_key, self.num_cards))

    def deal(self, values: Decks, queries: Decks) -> CountRecallState:
        """The state of an episode played with these piles: their first cards dealt and counted."""
        counts = jnp.zeros(self.num_kinds, jnp.int32).at[card_feature(values.card(0), self.deck_type)].add(1)
        return CountRecallState(values=values, queries=queries, counts=counts, score=_no_score())

    def next_task(self, key, state, params):
        return self.deal(state.task.values.next_episode(), state.task.queries.next_episode())

    def observe_task(self, state, params):
        task, t = state.task, state.time
        kinds = card_feature(jnp.stack([task.values.card(t), task.queries.card(t)]), self.deck_type)
        return one_hot(kinds, self.num_kinds)

    def task_observation_bounds(self, params):
        return np.zeros(2 * self.num_kinds, np.float32), np.ones(2 * self.num_kinds, np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(self.max_count + 1)

    def reward_denominator(self, task, params):
        return self.num_cards - 1

    def play(self, key, state, action, params):
        t = state.time
        value_key, query_key = jax.random.split(key)
        values = state.task.values.shuffle_step(value_key, t)
        queries = state.task.queries.shuffle_step(query_key, t)
        asked = state.task.counts[card_feature(queries.card(t), self.deck_type)]
        dealt = card_feature(values.card(t + 1), self.deck_type)
        counts = state.task.counts.at[dealt].add(1)
        task = state.task.replace(values=values, queries=queries, counts=counts)
        return task, _right_or_wrong(jnp.asarray(action) == asked), t + 1 == self.num_cards - 1, jnp.zeros((), bool)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_decks={self.num_decks}, deck_type={self.deck_type!r}, " \
               f"prev_action={self.prev_action})"


class Autoencode(_DealingTask):
    """Watch the whole deck, then name its suits in reverse order.

    The observation is the mode (one-hot of 2: 1 while watching, 0 once the last card is dealt) and
    a suit (one-hot of 4): the card just dealt while watching and at the last card, then suit 0 (popgym
    shows the suit of its card number 0 while the agent answers). The ``num_cards - 1`` watching steps
    score nothing whatever the action; the next ``num_cards`` steps score ``±1 / num_cards`` by the
    suits of the cards from the last dealt back to the first: ``2 * num_cards - 1`` steps.

    Args:
        num_decks: decks shuffled together (an integer >= 1; popgym's Easy / Medium / Hard: 1 / 2 / 3).
        prev_action: append the previous action to the observation.
    """

    def observe_task(self, state, params):
        n, t = self.num_cards, state.time
        watching = (t < n - 1).astype(jnp.int32)
        suit = jnp.where(t <= n - 1, card_feature(state.task.decks.card(jnp.minimum(t, n - 1)), "suits"), 0)
        return jnp.concatenate([one_hot(watching, 2), one_hot(suit, NUM_SUITS)])

    def task_observation_bounds(self, params):
        return np.zeros(2 + NUM_SUITS, np.float32), np.ones(2 + NUM_SUITS, np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(NUM_SUITS)

    @property
    def default_params(self) -> PopGymParams:
        return PopGymParams(max_steps_in_episode=2 * self.num_cards - 1)

    def reward_denominator(self, task, params):
        return self.num_cards

    def play(self, key, state, action, params):
        n, t = self.num_cards, state.time
        task = self._shuffle_next(key, state)
        recalled = task.decks.card(jnp.clip(2 * n - 2 - t, 0, n - 1))
        answer = _right_or_wrong(jnp.asarray(action) == card_feature(recalled, "suits"))
        units = jnp.where(t >= n - 1, answer, 0)
        return task, units, t == 2 * n - 2, jnp.zeros((), bool)


class HigherLower(_DealingTask):
    """Guess whether the next card ranks higher (action 0) or lower (action 1) than the one showing.

    The observation is the rank of the card showing (one-hot of 13). A right guess scores
    ``+1 / num_cards``, a wrong one ``-1 / num_cards``, equal ranks 0; ``num_cards - 1`` steps.

    Args:
        num_decks: decks shuffled together (an integer >= 1; popgym's Easy / Medium / Hard: 1 / 2 / 3).
        prev_action: append the previous action to the observation.
    """

    def observe_task(self, state, params):
        return one_hot(card_feature(state.task.decks.card(state.time), "ranks"), NUM_RANKS)

    def task_observation_bounds(self, params):
        return np.zeros(NUM_RANKS, np.float32), np.ones(NUM_RANKS, np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def reward_denominator(self, task, params):
        return self.num_cards

    def play(self, key, state, action, params):
        t = state.time
        task = self._shuffle_next(key, state)
        showing = card_feature(task.decks.card(t), "ranks")
        following = card_feature(task.decks.card(t + 1), "ranks")
        guessed_higher = jnp.asarray(action) == 0
        units = jnp.where(following == showing, 0, _right_or_wrong((following > showing) == guessed_higher))
        return task, units, t + 1 == self.num_cards - 1, jnp.zeros((), bool)


class Concentration(CardTask):
    """Turn cards two at a time (action: a position) to find pairs of the same colour or rank.

    All cards lie face down; the observation shows, for every position, the kind of its card where it
    is matched or was just turned and ``kinds`` (face down) elsewhere, one-hot of ``kinds + 1`` each.
    A pair of different positions with the same kind stays face up: ``+1 / (num_cards // 2)``; a
    pair that does not match ``-2 / L``; turning a card already face up ends the pair at once with
    ``-1 / L`` per card turned in it. The episode ends when every card is face up (terminated) or at
    the step whose start count is ``L - 1`` (truncated; both can happen at once), with
    ``L = ceil(2 n - n / (2 n - 1))``, ``n = 52 * num_decks`` (``L = 2 n``, so a pair scores 4 units of
    ``1 / L``).

    Args:
        num_decks: decks laid out (an integer >= 1).
        deck_type: ``"colors"`` or ``"ranks"`` (suits are not allowed: 13 cards of a suit cannot all
            be paired). popgym's Easy / Medium / Hard: colors with 1 deck / colors with 2 / ranks with 1.
        prev_action: append the previous action to the observation.
    """

    def __init__(self, num_decks: int = 1, deck_type: str = "ranks", prev_action: bool = True):
        super().__init__(num_decks=num_decks, prev_action=prev_action)
        self.deck_type = check_choice("deck_type", deck_type, ("colors", "ranks"))
        self.num_kinds = FEATURE_SIZES[deck_type]
        n = self.num_cards
        self.episode_length = math.ceil(2 * n - n / (2 * n - 1))
        # popgym's success reward 1 / (n // 2) is 4 units of its failure reward's 1 / L
        assert self.episode_length == 4 * (n // 2), (n, self.episode_length)

    def init_task(self, key, params):
        return self.lay_out(Decks.shuffled(key, self.num_cards))

    def lay_out(self, decks: Decks) -> ConcentrationState:
        """The state of a game on this layout: every card face down, none turned."""
        no = jnp.zeros(self.num_cards, bool)
        return ConcentrationState(decks=decks, face_up=no, pending=jnp.asarray(-1, jnp.int32), shown=no,
                                  score=_no_score())

    def next_task(self, key, state, params):
        return self.lay_out(state.task.decks.next_episode())

    def observe_task(self, state, params):
        task = state.task
        kinds = jnp.where(task.shown, card_feature(task.decks.deck, self.deck_type), self.num_kinds)
        return one_hot(kinds, self.num_kinds + 1)

    def task_observation_bounds(self, params):
        size = self.num_cards * (self.num_kinds + 1)
        return np.zeros(size, np.float32), np.ones(size, np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(self.num_cards)

    @property
    def default_params(self) -> PopGymParams:
        return PopGymParams(max_steps_in_episode=int(self.episode_length))

    def reward_denominator(self, task, params):
        return self.episode_length

    def play(self, key, state, action, params):
        task = state.task
        decks = task.decks.shuffle_step(key, state.time)
        position = jnp.clip(jnp.asarray(action, jnp.int32), 0, self.num_cards - 1)
        first = task.pending
        has_first = first >= 0
        first_position = jnp.maximum(first, 0)
        positions = jnp.arange(self.num_cards)
        turned = (positions == position) | (has_first & (positions == first))
        already_up = jnp.any(turned & task.face_up)
        first_kind, kind = card_feature(decks.card(jnp.stack([first_position, position])), self.deck_type)
        pair_matches = has_first & (first_kind == kind) & (first_position != position)
        turned_count = 1 + has_first.astype(jnp.int32)
        units = jnp.where(already_up, -turned_count, jnp.where(has_first, jnp.where(pair_matches, 4, -2), 0))
        matched = ~already_up & pair_matches
        face_up = jnp.where(matched, task.face_up | turned, task.face_up)
        pending = jnp.where(already_up | has_first, -1, position).astype(jnp.int32)
        new_task = task.replace(decks=decks, face_up=face_up, pending=pending, shown=task.face_up | turned)
        terminated = matched & jnp.all(face_up)
        truncated = state.time >= self.episode_length - 1
        return new_task, units, terminated, truncated

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_decks={self.num_decks}, deck_type={self.deck_type!r}, " \
               f"prev_action={self.prev_action})"


# ---------------------------------------------------------------------------------------------
# popgym's difficulties


RepeatFirstEasy = difficulty(RepeatFirst, "Easy", num_decks=1)
RepeatFirstMedium = difficulty(RepeatFirst, "Medium", num_decks=8)
RepeatFirstHard = difficulty(RepeatFirst, "Hard", num_decks=16)
RepeatPreviousEasy = difficulty(RepeatPrevious, "Easy", num_decks=1, k=4)
RepeatPreviousMedium = difficulty(RepeatPrevious, "Medium", num_decks=2, k=32)
RepeatPreviousHard = difficulty(RepeatPrevious, "Hard", num_decks=3, k=64)
CountRecallEasy = difficulty(CountRecall, "Easy", num_decks=1, deck_type="colors")
CountRecallMedium = difficulty(CountRecall, "Medium", num_decks=2, deck_type="suits")
CountRecallHard = difficulty(CountRecall, "Hard", num_decks=4, deck_type="ranks")
AutoencodeEasy = difficulty(Autoencode, "Easy", num_decks=1)
AutoencodeMedium = difficulty(Autoencode, "Medium", num_decks=2)
AutoencodeHard = difficulty(Autoencode, "Hard", num_decks=3)
HigherLowerEasy = difficulty(HigherLower, "Easy", num_decks=1)
HigherLowerMedium = difficulty(HigherLower, "Medium", num_decks=2)
HigherLowerHard = difficulty(HigherLower, "Hard", num_decks=3)
ConcentrationEasy = difficulty(Concentration, "Easy", num_decks=1, deck_type="colors")
ConcentrationMedium = difficulty(Concentration, "Medium", num_decks=2, deck_type="colors")
ConcentrationHard = difficulty(Concentration, "Hard", num_decks=1, deck_type="ranks")

#: popgym's class name -> the JAX class, for every task and difficulty here (e.g. ``"RepeatFirstEasy"``)
CARD_TASKS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        RepeatFirstEasy, RepeatFirstMedium, RepeatFirstHard,
        RepeatPreviousEasy, RepeatPreviousMedium, RepeatPreviousHard,
        CountRecallEasy, CountRecallMedium, CountRecallHard,
        AutoencodeEasy, AutoencodeMedium, AutoencodeHard,
        HigherLowerEasy, HigherLowerMedium, HigherLowerHard,
        ConcentrationEasy, ConcentrationMedium, ConcentrationHard,
    )
}
