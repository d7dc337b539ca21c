"""memgym 0.1's agent names still work until 0.3, each with a DeprecationWarning naming its replacement."""

from __future__ import annotations

import pytest

from memgym.agents.a2c import A2CConfig
from memgym.agents.dqn import DQNConfig
from memgym.agents.ppo import PPOConfig
from memgym.agents.registry import ALGORITHMS, make_train

SMALL = dict(memory="tiny-gru", num_envs=2, rollout_length=8, total_steps=2 * 8)


@pytest.mark.parametrize("module", ["memgym.agents.config", "memgym.agents.actor_critic"])
def test_actor_critic_config_builds_an_a2c_or_ppo_config(module):
    import importlib

    with pytest.warns(DeprecationWarning, match=r"ActorCriticConfig is now A2CConfig"):
        ActorCriticConfig = getattr(importlib.import_module(module), "ActorCriticConfig")
    assert ActorCriticConfig(**SMALL) == A2CConfig(**SMALL)
    assert ActorCriticConfig(algorithm="a2c", **SMALL) == A2CConfig(**SMALL)
    ppo = ActorCriticConfig(algorithm="ppo", num_minibatches=2, **SMALL)
    assert type(ppo) is PPOConfig and ppo == PPOConfig(num_minibatches=2, **SMALL)
    with pytest.raises(ValueError, match="algorithm must be 'a2c' or 'ppo', got algorithm='sac'"):
        ActorCriticConfig(algorithm="sac", **SMALL)


def test_dqn_config_from_the_config_module():
    with pytest.warns(DeprecationWarning,
                      match=r"memgym\.agents\.config\.DQNConfig is now memgym\.agents\.dqn\.DQNConfig"):
        from memgym.agents.config import DQNConfig as OldDQNConfig
    assert OldDQNConfig is DQNConfig


def test_agents_is_algorithms():
    with pytest.warns(DeprecationWarning, match=r"AGENTS is now memgym\.agents\.registry\.ALGORITHMS"):
        from memgym.agents.config import AGENTS
    assert AGENTS is ALGORITHMS


def test_actor_critic_make_train_is_the_generic_one():
    with pytest.warns(DeprecationWarning, match=r"actor_critic\.make_train is now memgym\.agents\.make_train"):
        from memgym.agents.actor_critic import make_train as old_make_train
    assert old_make_train is make_train


@pytest.mark.parametrize("name, module", [
    ("train_tmaze", "run"), ("train_gymnasium", "run"), ("TMAZE_IDS", "run"), ("save_checkpoint", "checkpoints"),
    ("load_checkpoint", "checkpoints"), ("plot_learning_curve", "logs"), ("STAT_KEYS", "logs"),
])
def test_training_module_names_moved(name, module):
    import importlib

    import memgym.agents.training as training

    with pytest.warns(DeprecationWarning, match=rf"memgym\.agents\.training\.{name} is now "
                                                rf"memgym\.agents\.{module}\.{name}"):
        old = getattr(training, name)
    assert old is getattr(importlib.import_module(f"memgym.agents.{module}"), name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        training.no_such_name  # noqa: B018


def test_linattn_preset_is_linear_attention_monoid():
    from memgym.agents.config import MEMORY_PRESETS, resolve_memory

    assert "linattn" not in MEMORY_PRESETS
    with pytest.warns(DeprecationWarning, match="memory preset 'linattn' is now 'linear_attention_monoid'"):
        old = resolve_memory("linattn", '{"key_size": 8}')
    assert old == resolve_memory("linear_attention_monoid", '{"key_size": 8}')
