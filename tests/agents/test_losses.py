"""The A2C, PPO and double-DQN losses against numbers worked out by hand.

Each test replaces the network pass of its trainer (``replay`` for the actor-critic
losses, ``markov_q`` for DQN) by a stub that hands back chosen logits, values or Q
values, so what is checked is exactly the loss arithmetic: GAE advantages and
targets, the clipped PPO objective with value clipping and advantage
normalisation, and the double-Q Huber target with terminal masking and SBB padding.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.actor_critic import ActorCriticTrainer
from memgym.agents.dqn import DQNConfig, DQNTrainer
from memgym.agents.ppo import PPOConfig, PPOTrainer
from memgym.buffers.rollout import Rollout
from memgym.buffers.tape import Batch
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

ENV = TMazeJax()
PARAMS = tmaze_params(3, max_episode_steps=20)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def entropy(logits: np.ndarray) -> np.ndarray:
    logp = log_softmax(logits)
    return -(np.exp(logp) * logp).sum(-1)


def stub_replay(trainer: ActorCriticTrainer) -> None:
    """The "network" becomes its parameters: ``params = {"logits": [N, T, A], "values": [N, T]}``."""
    trainer.replay = lambda params, obs, start, carry: (params["logits"], params["values"])


# --- A2C -------------------------------------------------------------------------------------------


@pytest.mark.slow(seconds=14)
def test_a2c_loss_matches_hand_computed_value():
    gamma, lam, value_coef, entropy_coef = 0.9, 0.8, 0.5, 0.01
    trainer = A2CTrainer(
        A2CConfig(memory="tiny-gru", num_envs=2, rollout_length=3, total_steps=6, gamma=gamma, gae_lambda=lam,
                  value_coef=value_coef, entropy_coef=entropy_coef),
        ENV, PARAMS,
    )
    stub_replay(trainer)
    # Two environments, three steps each; values[:, 3] is V of the observation after the rollout.
    # env 0: the episode terminates at t = 1, a new one begins at t = 2.
    # env 1: the episode is truncated at t = 1 (time limit), V(cut-off observation) = 0.7.
    values = np.array([[1.0, 2.0, 0.5, 1.5], [0.0, -1.0, 2.0, 1.0]], np.float32)
    reward = np.array([[0.5, 1.0, -0.2], [0.0, 0.3, 1.0]], np.float32)
    terminated = np.array([[False, True, False], [False, False, False]])
    truncated = np.array([[False, False, False], [False, True, False]])
    final_value = np.array([[0.0, 0.0, 0.0], [0.0, 0.7, 0.0]], np.float32)
    action = np.array([[0, 2, 1], [3, 1, 0]], np.int32)
    logits = np.array(
        [[[0.1, -0.4, 1.2, 0.0], [2.0, 0.5, -1.0, 0.3], [0.0, 0.0, 0.7, -0.7], [9.0, 9.0, 9.0, 9.0]],
         [[-0.5, 0.5, 0.2, 1.1], [0.3, 0.3, 0.0, -2.0], [1.5, -0.5, 0.0, 0.0], [9.0, 9.0, 9.0, 9.0]]],
        np.float32,
    )
    # GAE by hand, delta_t = r_t + γ(1 − term_t) V_next − V_t, A_t = delta_t + γλ(1 − done_t) A_{t+1}:
    # env 0: delta = (0.5 + 0.9·2 − 1, 1 − 2, −0.2 + 0.9·1.5 − 0.5) = (1.3, −1, 0.65)
    #        A = (1.3 + 0.72·(−1), −1, 0.65) = (0.58, −1, 0.65)
    # env 1: delta = (0 + 0.9·(−1) − 0, 0.3 + 0.9·0.7 + 1, 1 + 0.9·1 − 2) = (−0.9, 1.93, −0.1)
    #        A = (−0.9 + 0.72·1.93, 1.93, −0.1) = (0.4896, 1.93, −0.1)
    adv = np.array([[0.58, -1.0, 0.65], [0.4896, 1.93, -0.1]])
    # The value targets are A + V, so the squared TD(λ) error of V is A².
    expected_value_loss = np.mean(adv**2)  # the mean squared error itself: Table A.1's coefficient weighs it
    logp = np.take_along_axis(log_softmax(logits[:, :3]), action[..., None], -1)[..., 0]
    expected_policy_loss = -np.mean(logp * adv)
    expected_entropy = np.mean(entropy(logits[:, :3]))
    expected = expected_policy_loss + value_coef * expected_value_loss - entropy_coef * expected_entropy

    obs = np.zeros((2, 3, trainer.spec.obs_size), np.float32)
    rollout = Rollout(
        obs=obs, start=np.array([[True, False, True], [False, False, True]]), action=action, reward=reward,
        terminated=terminated, truncated=truncated, value=values[:, :3], log_prob=np.zeros((2, 3), np.float32),
        final_value=final_value, carry=(), next_obs=obs[:, 0], next_start=np.zeros(2, bool),
    )
    params = {"logits": jnp.asarray(logits), "values": jnp.asarray(values)}
    loss, parts = jax.jit(trainer.loss)(params, rollout)
    assert float(parts["value_loss"]) == pytest.approx(expected_value_loss, abs=1e-6)
    assert float(parts["policy_loss"]) == pytest.approx(expected_policy_loss, abs=1e-6)
    assert float(parts["entropy"]) == pytest.approx(expected_entropy, abs=1e-6)
    assert float(loss) == pytest.approx(expected, abs=1e-6)

    # The critic's gradient flows only through V_t, not through its own targets:
    # d loss / d V_t = value_coef · 2 (V_t − target_t) / 6 = −value_coef · A_t / 3; V_T gets none.
    grads = jax.grad(lambda p: trainer.loss(p, rollout)[0])(params)
    np.testing.assert_allclose(grads["values"][:, :3], -value_coef * adv / 3, atol=1e-6)
    np.testing.assert_allclose(grads["values"][:, 3], 0.0, atol=1e-7)


# --- PPO -------------------------------------------------------------------------------------------


def test_ppo_clipped_loss_matches_hand_computed_value():
    clip_eps, value_clip, value_coef, entropy_coef = 0.2, 0.5, 0.5, 0.01
    trainer = PPOTrainer(
        PPOConfig(memory="tiny-gru", num_envs=2, rollout_length=2, total_steps=4, num_minibatches=1,
                  clip_eps=clip_eps, value_clip=value_clip, value_coef=value_coef, entropy_coef=entropy_coef),
        ENV, PARAMS,
    )
    stub_replay(trainer)
    logits = np.array([[[0.3, -0.2, 1.0, 0.0], [1.0, 1.0, -1.0, 0.5]],
                       [[0.0, 0.0, 0.0, 0.0], [-1.0, 2.0, 0.5, 0.1]]], np.float32)
    action = np.array([[2, 0], [1, 3]], np.int32)
    new_logp = np.take_along_axis(log_softmax(logits), action[..., None], -1)[..., 0]
    # New/old probability ratios 1.5, 0.5, 1.1, 0.9 (stored log-probs chosen to give them).
    ratio = np.array([[1.5, 0.5], [1.1, 0.9]])
    old_logp = (new_logp - np.log(ratio)).astype(np.float32)
    # Advantages (2, −2, 2, −2): mean 0 and standard deviation 2, so normalised they are ±1.
    advantage = np.array([[2.0, -2.0], [2.0, -2.0]], np.float32)
    # min(ratio·A, clip(ratio, 0.8, 1.2)·A) per element:
    #   A = +1, ratio 1.5 -> min(1.5, 1.2) = 1.2       (clipped above)
    #   A = −1, ratio 0.5 -> min(−0.5, −0.8) = −0.8    (clipped below)
    #   A = +1, ratio 1.1 -> 1.1;  A = −1, ratio 0.9 -> −0.9  (inside the clip range)
    expected_policy_loss = -(1.2 - 0.8 + 1.1 - 0.9) / 4  # = −0.15
    # Values: old (acting-time) values, new values and targets; clipped value = old + clip(new − old, ±0.5).
    old_value = np.array([[0.0, 1.0], [2.0, -1.0]], np.float32)
    new_value = np.array([[1.0, 0.2], [2.3, -3.0]], np.float32)
    target = np.array([[0.8, 0.0], [2.1, -2.0]], np.float32)
    #   clipped = (0.5, 0.5, 2.3, −1.5)
    #   (new − target)²     = (0.04, 0.04, 0.04, 1.0)
    #   (clipped − target)² = (0.09, 0.25, 0.04, 0.25)
    #   max                 = (0.09, 0.25, 0.04, 1.0), mean 0.345
    expected_value_loss = 0.5 * 0.345
    expected_entropy = np.mean(entropy(logits))
    expected = expected_policy_loss + value_coef * expected_value_loss - entropy_coef * expected_entropy

    batch = dict(
        obs=np.zeros((2, 2, trainer.spec.obs_size), np.float32), start=np.zeros((2, 2), bool), carry=(),
        action=action, log_prob=old_logp, value=old_value, advantage=advantage, target=target,
    )
    params = {"logits": jnp.asarray(logits), "values": jnp.asarray(new_value)}
    loss, parts = jax.jit(trainer.loss)(params, batch)
    assert float(parts["policy_loss"]) == pytest.approx(expected_policy_loss, abs=1e-6)
    assert float(parts["value_loss"]) == pytest.approx(expected_value_loss, abs=1e-6)
    assert float(parts["entropy"]) == pytest.approx(expected_entropy, abs=1e-6)
    assert float(loss) == pytest.approx(expected, abs=1e-6)

    # Where clipping is active the objective is flat: no policy gradient through those log-probs.
    grads = jax.grad(lambda p: trainer.loss(p, batch)[1]["policy_loss"])(params)["logits"]
    np.testing.assert_allclose(grads[0, 0], 0.0, atol=1e-7)  # ratio 1.5, A > 0: clipped
    np.testing.assert_allclose(grads[0, 1], 0.0, atol=1e-7)  # ratio 0.5, A < 0: clipped
    assert np.abs(np.asarray(grads[1])).max() > 1e-3  # inside the range: gradient flows


# --- DQN -------------------------------------------------------------------------------------------

A = 3  # actions of the stub Q functions


def dqn_trainer(batching: str) -> DQNTrainer:
    config = DQNConfig(memory="tiny-gru", batching=batching, gamma=0.9, num_envs=1, batch_size=4, segment_length=2,
                       buffer_size=64, learning_starts=0, total_steps=8)
    trainer = DQNTrainer(config, ENV, PARAMS)

    # The "network" reads its Q values off the observations: Q(s_t) = scale · obs_t and
    # Q(s'_t) = scale · next_obs_t[:A] for the online parameters, scale · next_obs_t[A:] for
    # the target parameters, so online and target disagree about the next state.
    def markov_q(params, obs, next_obs, start):
        q_next = jnp.where(params["target"] > 0.5, next_obs[..., A:], next_obs[..., :A])
        return params["scale"] * obs, params["scale"] * q_next

    trainer.markov_q = markov_q
    return trainer


# Three transitions; actions 1, 2, 0; the last ends its episode (terminated).
Q = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [0.2, 0.4, 0.6]], np.float32)
ONLINE_NEXT = np.array([[0.1, 0.9, 0.3], [2.0, 0.0, 1.0], [0.0, 0.0, 5.0]], np.float32)  # argmax 1, 0, 2
TARGET_NEXT = np.array([[5.0, 1.5, -3.0], [0.5, 9.0, 9.0], [1.0, 1.0, 1.0]], np.float32)
ACTION = np.array([1, 2, 0], np.int32)
REWARD = np.array([0.5, 1.0, -1.0], np.float32)
TERMINATED = np.array([False, False, True])
# Double DQN: the target network values the *online* argmax (1.5, 0.5, ·), not its own max (5, 9, ·).
#   y      = (0.5 + 0.9·1.5, 1.0 + 0.9·0.5, −1.0) = (1.85, 1.45, −1.0)
#   Q(s,a) = (2.0, 3.0, 0.2);  TD = (0.15, 1.55, 1.2)
#   Huber(δ = 1): 0.5·0.15² = 0.01125; 1.55 − 0.5 = 1.05; 1.2 − 0.5 = 0.7
EXPECTED_DQN_LOSS = (0.01125 + 1.05 + 0.7) / 3
EXPECTED_Q_MEAN = (2.0 + 3.0 + 0.2) / 3
ONLINE = {"scale": jnp.float32(1.0), "target": jnp.float32(0.0)}
TARGET = {"scale": jnp.float32(1.0), "target": jnp.float32(1.0)}


def transitions() -> dict[str, np.ndarray]:
    return dict(obs=Q, action=ACTION, reward=REWARD, next_obs=np.concatenate([ONLINE_NEXT, TARGET_NEXT], 1),
                terminated=TERMINATED)


def test_dqn_double_q_huber_loss_matches_hand_computed_value():
    trainer = dqn_trainer("tape")
    batch = Batch(transitions(), start=np.array([True, False, False]), mask=np.ones(3, bool))
    loss, aux = jax.jit(trainer.loss)(ONLINE, TARGET, batch)
    assert float(loss) == pytest.approx(EXPECTED_DQN_LOSS, abs=1e-6)
    assert float(aux["q_mean"]) == pytest.approx(EXPECTED_Q_MEAN, abs=1e-6)

    # d loss / d scale = Σ huber'(TD) · Q(s, a) / 3 with huber' = TD inside ±1, sign(TD) outside;
    # the target is a constant (no gradient through y).
    grads = jax.grad(lambda p: trainer.loss(p, TARGET, batch)[0])(ONLINE)
    assert float(grads["scale"]) == pytest.approx((0.15 * 2.0 + 1.0 * 3.0 + 1.0 * 0.2) / 3, abs=1e-6)


def test_dqn_segment_loss_sums_real_transitions_over_the_batch_slots():
    """SBB: the same three transitions in two segments of two, the fourth slot padding. Alg. 2 minimises the
    masked sum over the batch's slots, so the loss is the three Huber terms over 4 slots, not over 3: a
    batch that is mostly padding moves the weights less (monoid paper, Sec. 4). The padding's values
    change nothing, and the Q diagnostic stays a mean over the real transitions."""
    trainer = dqn_trainer("segment")
    data = transitions()
    pad = dict(obs=np.full((1, A), 100.0, np.float32), action=np.zeros(1, np.int32),
               reward=np.full(1, 1e6, np.float32), next_obs=np.full((1, 2 * A), -50.0, np.float32),
               terminated=np.zeros(1, bool))
    data = {k: np.concatenate([v, pad[k]]).reshape((2, 2) + v.shape[1:]) for k, v in data.items()}
    start = np.array([[True, False], [False, False]])  # the second segment starts mid-episode
    mask = np.array([[True, True], [True, False]])
    loss, aux = jax.jit(trainer.loss)(ONLINE, TARGET, Batch(data, start, mask))
    assert float(loss) == pytest.approx(EXPECTED_DQN_LOSS * 3 / 4, abs=1e-6)
    assert float(aux["q_mean"]) == pytest.approx(EXPECTED_Q_MEAN, abs=1e-6)


def test_hand_numbers_are_consistent():
    """The worked numbers above, recomputed in float64 numpy (guards against arithmetic slips)."""
    next_action = ONLINE_NEXT.argmax(1)
    y = REWARD + 0.9 * (~TERMINATED) * TARGET_NEXT[np.arange(3), next_action]
    td = Q[np.arange(3), ACTION].astype(np.float64) - y
    huber = np.where(np.abs(td) <= 1, 0.5 * td**2, np.abs(td) - 0.5)
    assert huber.mean() == pytest.approx(EXPECTED_DQN_LOSS, abs=1e-6)
    assert math.isclose(0.58, 1.3 + 0.72 * -1.0, abs_tol=1e-12)
    assert math.isclose(0.4896, -0.9 + 0.72 * 1.93, abs_tol=1e-12)
