"""Refusing more environments than the machine's memory holds (memgym.envs.memory_check), measured for real
on an environment that holds 64 MiB."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from memgym.envs import memory_check
from memgym.envs.memory_check import EnvMemory, NotEnoughMemory, check_num_envs, measure_env_memory

MIB = 2**20


class HeavyEnv(gym.Env):
    """Holds 64 MiB of touched memory from its first reset until it is closed (as a simulator would)."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.buffer = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.buffer = np.ones(64 * MIB, np.uint8)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def close(self):
        self.buffer = None


def test_readings_are_plausible():
    assert 10 * MIB < memory_check.resident_bytes() < 1 << 40
    available = memory_check.available_bytes()
    assert available is None or 0 < available < 1 << 50


def test_two_environments_are_measured():
    memory = measure_env_memory(HeavyEnv)
    assert 56 * MIB < memory.each < 72 * MIB, memory
    assert memory.first >= memory.each
    assert memory.need(10) == memory.first + 9 * memory.each


def test_arithmetic_of_what_fits():
    memory = EnvMemory(first=3 * 2**30, each=2**30, available=10 * 2**30)  # 80% of 10 GiB = 8 GiB
    assert memory.fits(6) and not memory.fits(7)
    assert memory.most_that_fit() == 6
    assert EnvMemory(first=9 * 2**30, each=2**30, available=10 * 2**30).most_that_fit() == 0
    assert EnvMemory(first=1, each=1, available=None).fits(10**9)  # unknown memory: nothing refused


def test_refusal_names_both_figures_the_flag_and_the_largest_that_fits(monkeypatch):
    monkeypatch.setattr(memory_check, "available_bytes", lambda: 2**30)  # a 1 GiB machine
    with pytest.raises(NotEnoughMemory) as error:
        check_num_envs(HeavyEnv, 64, what="HeavyEnv", flag="--num-envs")
    message = str(error.value)
    assert "--num-envs 64" in message and "HeavyEnv" in message and "1.00 GiB of memory available" in message
    assert "need about 4." in message  # 64 x 64 MiB and the first one's extra
    most = int(message.rsplit("the largest --num-envs that fits is ", 1)[1])
    assert 8 <= most <= 13  # 0.8 GiB / 64 MiB, less the first one's extra
    assert isinstance(error.value, ValueError)  # the CLI prints it without a traceback
    assert check_num_envs(HeavyEnv, 4, what="HeavyEnv").each > 56 * MIB  # what fits is let through
