"""A2C and PPO: replay from stored carries reproduces acting, learning on T-Maze, both PPO batchings."""

from __future__ import annotations

import dataclasses

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.actor_critic import ActorCriticTrainer
from memgym.agents.ppo import PPOConfig, PPOTrainer
from memgym.buffers.rollout import replay_inputs
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

BASE = dict(memory="tiny-gru", num_envs=8, rollout_length=32, total_steps=8 * 32 * 4, learning_rate=1e-3,
            entropy_coef=1e-2)
PPO_BASE = dict(num_minibatches=2, segment_length=8)


def config(**overrides) -> A2CConfig:
    return A2CConfig(**{**BASE, **overrides})


def ppo_config(**overrides) -> PPOConfig:
    return PPOConfig(**{**BASE, **PPO_BASE, **overrides})


@pytest.mark.parametrize("memory", ["tiny-gru", "tiny-arelit"])
@pytest.mark.slow
def test_replay_from_stored_carries_reproduces_acting(memory):
    """Two rollouts in a row: the learner's tape replay gives the actor's values and log-probs."""
    trainer = A2CTrainer(config(memory=memory), TMazeJax())
    params = tmaze_params(3, max_episode_steps=12)
    state = trainer.init(jax.random.key(0), params)
    collect = jax.jit(lambda state, params: trainer.collect(state, params, state.params))
    state, _, _ = collect(state, params)  # the second rollout starts from a non-trivial carry
    state, trajectory, stats = collect(state, params)
    rollout = trainer.rollout(state, trajectory)
    obs, start = replay_inputs(rollout)
    logits, values = trainer.replay(state.params, obs, start, rollout.carry)
    np.testing.assert_allclose(values[:, :-1], rollout.value, atol=1e-4)
    log_prob = distrax.Categorical(logits=logits[:, :-1]).log_prob(rollout.action)
    np.testing.assert_allclose(log_prob, rollout.log_prob, atol=1e-4)
    assert int(stats["episodes"]) > 0
    # time-limit truncations bootstrap from the value of the cut-off observation
    truncated = np.asarray(rollout.truncated & ~rollout.terminated)
    assert truncated.any() and np.all(np.asarray(rollout.final_value)[~truncated] == 0)


# A recurrent carry (GRU) and a monoid's (AReLiT) in CI; ReLiT's and DeltaNet's, the same property on other carries,
# about 50 s each, in the extended tests.
@pytest.mark.parametrize("memory", ["tiny-gru", "tiny-arelit", pytest.param("tiny-relit", marks=pytest.mark.extended),
                                    pytest.param("tiny-deltanet", marks=pytest.mark.extended)])
@pytest.mark.slow(seconds=70)
def test_replay_in_checkpointed_chunks_equals_the_whole_replay(memory):
    """``replay_chunk_size`` changes memory and compute only: the logits, values and loss gradients of a
    256-step rollout (the thesis length; episodes start inside it, pieces do not divide it) equal one replay, for
    pieces of 16 and 100 steps (both compared with the one whole replay, compiled once)."""
    whole = A2CTrainer(config(memory=memory, num_envs=4, rollout_length=256, total_steps=4 * 256), TMazeJax())
    params = tmaze_params(4, max_episode_steps=30)
    state = whole.init(jax.random.key(1), params)
    collect = jax.jit(lambda state, params: whole.collect(state, params, state.params))
    state, _, _ = collect(state, params)  # the replayed rollout starts from a non-trivial carry
    state, trajectory, stats = collect(state, params)
    assert int(stats["episodes"]) > 8
    rollout = whole.rollout(state, trajectory)
    obs, start = replay_inputs(rollout)
    replayed = jax.jit(whole.replay)(state.params, obs, start, rollout.carry)
    grads = jax.jit(jax.grad(lambda p: whole.loss(p, rollout)[0]))(state.params)
    for chunk in (16, 100):
        chunked = A2CTrainer(dataclasses.replace(whole.config, replay_chunk_size=chunk), TMazeJax())
        for a, b in zip(replayed, jax.jit(chunked.replay)(state.params, obs, start, rollout.carry), strict=True):
            np.testing.assert_allclose(b, a, atol=2e-5, rtol=1e-4, err_msg=f"replay_chunk_size={chunk}")
        chunked_grads = jax.jit(jax.grad(lambda p, t=chunked: t.loss(p, rollout)[0]))(state.params)
        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(chunked_grads), strict=True):
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-3, err_msg=f"replay_chunk_size={chunk}")


def test_replay_in_chunks_is_refused_where_the_carry_stops_gradients():
    """GTrXL's window enters each call without gradients: pieces would train it differently, so it is refused."""
    gtrxl = '{"features": 16, "num_layers": 1, "num_heads": 2, "head_dim": 8, "memory_size": 8}'
    with pytest.raises(ValueError, match="replay_chunk_size=32 cannot be used with GTrXL: its carry enters a call "
                                         "without gradients"):
        A2CTrainer(config(memory="gtrxl", memory_config=gtrxl, replay_chunk_size=32), TMazeJax())
    A2CTrainer(config(memory="gtrxl", memory_config=gtrxl), TMazeJax())  # the whole replay is fine


def success_at_end(metrics) -> np.ndarray:
    episodes = np.asarray(metrics["episodes"])
    successes = np.asarray(metrics["successes"])
    tail = episodes.shape[-1] // 5
    return successes[..., -tail:].sum(-1) / np.maximum(episodes[..., -tail:].sum(-1), 1)


@pytest.mark.slow
def test_a2c_learns_tmaze_for_two_corridor_lengths_in_one_call():
    trainer = A2CTrainer(config(total_steps=100_000), TMazeJax())
    params = tmaze_params(np.array([3, 5]), max_episode_steps=np.array([50, 50]))
    _, metrics = jax.jit(jax.vmap(trainer.train))(jax.random.split(jax.random.key(0), 2), params)
    assert metrics["episodes"].shape == (2, trainer.config.num_updates)
    np.testing.assert_array_less(0.9, success_at_end(metrics))
    assert np.all(np.diff(np.asarray(metrics["env_steps"])) == trainer.config.env_steps_per_update)


@pytest.mark.parametrize("batching", ["tape", "segment"])
@pytest.mark.slow
def test_ppo_learns_short_tmaze(batching):
    trainer = PPOTrainer(ppo_config(batching=batching, total_steps=60_000, learning_rate=3e-3, epochs=2), TMazeJax())
    _, metrics = jax.jit(trainer.train)(jax.random.key(1), tmaze_params(2, max_episode_steps=30))
    assert np.isfinite(np.asarray(metrics["policy_loss"])).all()
    assert success_at_end(metrics) > 0.9


@pytest.mark.slow
def test_run_continues_train():
    """``init`` + ``run`` in two chunks equals one ``train`` call (resumable training)."""
    trainer = A2CTrainer(config(), TMazeJax())
    params = tmaze_params(3, max_episode_steps=20)
    whole, metrics = jax.jit(trainer.train)(jax.random.key(3), params)
    run = jax.jit(trainer.run, static_argnums=2)
    state = trainer.init(jax.random.key(3), params)
    state, first = run(state, params, 1)
    state, rest = run(state, params, 3)
    for a, b in zip(jax.tree.leaves(whole.params), jax.tree.leaves(state.params)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_array_equal(np.concatenate([first["episodes"], rest["episodes"]]), metrics["episodes"])


@pytest.mark.slow(seconds=18)
def test_act_is_one_step_of_the_policy():
    trainer = A2CTrainer(config(), TMazeJax())
    policy = trainer.init_params(jax.random.key(0))
    obs, _ = TMazeJax().reset(jax.random.key(1), tmaze_params(3))
    action, carry = trainer.act(policy, trainer.initialize_carry(), obs, jnp.ones((), bool), jax.random.key(2))
    assert action.shape == () and 0 <= int(action) < 4
    assert jax.tree.structure(carry) == jax.tree.structure(trainer.initialize_carry())


@pytest.mark.parametrize("make", [config, ppo_config], ids=["a2c", "ppo"])
@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(gamma=1.5), r"gamma must be a number in \[0, 1\], got gamma=1.5"),
        (dict(learning_rate=0), r"learning_rate must be a number in \(0, inf\], got learning_rate=0"),
        (dict(num_envs=0), "num_envs must be a positive integer, got num_envs=0"),
        (dict(total_steps=10), "total_steps=10 is less than one update"),
        (dict(memory="transformer"), "unknown memory 'transformer'"),
        (dict(memory_config="{bad"), "memory_config must be a JSON object"),
        (dict(memory_config='{"foo": 1}'), r"unknown option\(s\) \['foo'\]"),
        (dict(replay_chunk_size=-1), r"replay_chunk_size must be an integer >= 0 \(0 replays the whole rollout at "
                                     r"once\), got replay_chunk_size=-1"),
    ],
)
def test_bad_config(make, overrides, message):
    with pytest.raises(ValueError, match=message):
        make(**overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(batching="ring"), "batching must be one of 'tape', 'segment', got batching='ring'"),
        (dict(epochs=0), "epochs must be a positive integer, got epochs=0"),
        (dict(clip_eps=0.0), r"clip_eps must be a number in \(0, inf\], got clip_eps=0.0"),
        (dict(num_minibatches=3), "num_minibatches=3 must divide"),
        (dict(batching="segment", segment_length=7), "multiple of segment_length=7"),
    ],
)
def test_bad_ppo_config(overrides, message):
    with pytest.raises(ValueError, match=message):
        ppo_config(**overrides)


def test_a2c_config_has_no_ppo_fields():
    assert {f.name for f in dataclasses.fields(PPOConfig)} - {f.name for f in dataclasses.fields(A2CConfig)} == {
        "epochs", "num_minibatches", "clip_eps", "value_clip", "batching", "segment_length"}
    with pytest.raises(TypeError, match="epochs"):
        A2CConfig(epochs=2)
    assert not hasattr(A2CConfig(), "algorithm") and not hasattr(PPOConfig(), "algorithm")
    assert ppo_config(batching="segment").num_rows == 8 * 32 // 8 and ppo_config().num_rows == 8
    assert issubclass(A2CTrainer, ActorCriticTrainer) and issubclass(PPOTrainer, ActorCriticTrainer)


@pytest.mark.slow
def test_truncation_bootstrap_runs_the_network_only_on_steps_with_a_cut():
    """``final_value`` is the critic's value of the observation a time limit cut the episode at; the
    collector computes it only on steps where some episode of the whole (vmapped) batch was cut, with
    the same values as running the critic on every step."""
    from memgym.memory.batching import any_in_batch

    assert any_in_batch(jnp.array([False, True]))
    nested = jax.vmap(jax.vmap(lambda flags: any_in_batch(flags)))(jnp.zeros((2, 3, 4), bool).at[1, 2, 0].set(True))
    assert nested.shape == (2, 3) and bool(nested.all())  # one answer for the whole batch, broadcast

    calls = []

    class CountingTrainer(A2CTrainer):
        def bootstrap(self, params, carry, obs):
            jax.debug.callback(lambda: calls.append(1))
            return super().bootstrap(params, carry, obs)

    config = A2CConfig(memory="tiny-gru", num_envs=3, rollout_length=40, total_steps=3 * 40)
    params = tmaze_params(np.array([2, 3]), max_episode_steps=np.array([7, 9]))
    trainer = CountingTrainer(config, TMazeJax(), example_params=tmaze_params(2))
    state = jax.vmap(trainer.init)(jax.random.split(jax.random.key(0), 2), params)
    acting = jax.vmap(lambda s: trainer.acting(s)[0])(state)
    _, trajectory, _ = jax.jit(jax.vmap(trainer.collect))(state, params, acting)
    steps = trajectory.steps
    cut = np.asarray(steps["truncated"] & ~steps["terminated"])  # [seeds, E, T]
    assert cut.any() and not cut.any(axis=(0, 1)).all()
    assert len(calls) == int(cut.any(axis=(0, 1)).sum())  # one batched call per step with a cut anywhere

    # Replay each stream to its cut and compare with the critic on the recorded final observation.
    final_value = np.asarray(steps["final_value"])
    assert np.all(final_value[~cut] == 0.0)
    for seed, env, t in zip(*np.nonzero(cut)):
        carry = jax.tree.map(lambda x: x[seed, env], trajectory.carry)
        obs = np.concatenate([np.asarray(steps["obs"][seed, env, : t + 1]), np.asarray(steps["next_obs"][seed, env, t])[None]])
        start = np.concatenate([np.asarray(steps["start"][seed, env, : t + 1]), [False]])
        _, values, _ = trainer.network.apply(jax.tree.map(lambda x: x[seed], state.params), jnp.asarray(obs),
                                             jnp.asarray(start), carry)
        np.testing.assert_allclose(final_value[seed, env, t], values[-1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make, trainer_class", [(config, A2CTrainer), (ppo_config, PPOTrainer)], ids=["a2c", "ppo"])
@pytest.mark.parametrize("anneal_lr", [False, True])
def test_learning_rate_is_constant_or_annealed_linearly_to_zero(make, trainer_class, anneal_lr):
    """With a constant gradient Adam's step is the learning rate: constant, or (``anneal_lr``) falling linearly
    from ``learning_rate`` to 0 over every optimiser step of the run (A2C one per update, PPO epochs × minibatches)."""
    cfg = make(anneal_lr=anneal_lr)
    trainer = trainer_class(cfg, TMazeJax())
    params = trainer.init_params(jax.random.key(0))
    opt_state = trainer.init_learner(params)
    grads = jax.tree.map(jnp.ones_like, params)
    total = cfg.num_updates * cfg.gradient_steps_per_update
    assert total == cfg.num_updates * (1 if make is config else cfg.epochs * cfg.num_minibatches)
    step = jax.jit(trainer.apply_gradients)
    sizes = []
    for _ in range(total + 1):
        new, opt_state = step(params, opt_state, grads)
        sizes.append(max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(params))))
        params = new
    expected = cfg.learning_rate * (1 - np.arange(total + 1) / total) if anneal_lr else np.full(total + 1, cfg.learning_rate)
    np.testing.assert_allclose(sizes, expected, rtol=0.02, atol=1e-9)


@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize("make, trainer_class", [(config, A2CTrainer), (ppo_config, PPOTrainer)], ids=["a2c", "ppo"])
def test_a_box_action_space_gets_a_gaussian_policy_whose_samples_are_clipped_for_the_env(make, trainer_class):
    """On the Pendulum (a torque in Box(-2, 2, (1,))): the actor's mean and a learned log standard deviation per
    entry (starting at 0) make a Gaussian; the trainer learns from its samples, the environment gets them clipped to
    the bounds, and one update changes the log standard deviation (the loss reaches it)."""
    from memgym.envs import make_jax

    env, params = make_jax("memgym/popgym-PositionOnlyPendulumEasy-v0")
    trainer = trainer_class(make(total_steps=8 * 32 * 2), env)
    assert trainer.spec.action_box == ((-2.0,), (2.0,)) and trainer.spec.num_actions == 1
    state = trainer.init(jax.random.key(0), params)
    assert np.asarray(state.params["params"]["log_std"]).tolist() == [0.0]
    obs, _ = env.reset(jax.random.key(1), params)
    head, _, _ = trainer.heads(state.params, trainer.initialize_carry(), obs, jnp.ones((), bool))
    dist = trainer.distribution(head)
    assert isinstance(dist, distrax.MultivariateNormalDiag) and np.allclose(dist.stddev(), 1.0)
    samples = dist.sample(seed=jax.random.key(2), sample_shape=4000)
    assert float(jnp.abs(samples).max()) > 2.0  # the Gaussian reaches past the bounds ...
    clipped = trainer.spec.env_action(samples)
    assert clipped.dtype == jnp.float32 and float(jnp.abs(clipped).max()) == 2.0  # ... the env gets them clipped
    np.testing.assert_array_equal(trainer.spec.env_action(np.array([[-3.0], [0.5]])), [[-2.0], [0.5]])
    state, _ = jax.jit(trainer.update)(state, params)
    assert np.asarray(state.params["params"]["log_std"]).tolist() != [0.0]


def test_dqn_refuses_a_box_action_space_by_name():
    from memgym.agents.dqn import DQNConfig, DQNTrainer
    from memgym.envs import make_jax

    env, _ = make_jax("memgym/popgym-PositionOnlyPendulumEasy-v0")
    with pytest.raises(ValueError, match=r"DQN chooses among discrete actions.*train it with A2C or PPO"):
        DQNTrainer(DQNConfig(memory="tiny-gru"), env)
