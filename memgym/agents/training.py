"""memgym 0.1's ``memgym.agents.training``, split by job in 0.2: :mod:`memgym.agents.run` (the training loops),
:mod:`memgym.agents.checkpoints`, :mod:`memgym.agents.logs`. Old imports warn until 0.3."""

from memgym.deprecation import forward

_MOVED = {"train_tmaze": "run", "train_gymnasium": "run", "TMAZE_IDS": "run", "save_checkpoint": "checkpoints",
          "load_checkpoint": "checkpoints", "plot_learning_curve": "logs", "STAT_KEYS": "logs"}
__getattr__ = forward(__name__, {name: f"memgym.agents.{module}.{name}" for name, module in _MOVED.items()})
