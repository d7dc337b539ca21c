"""Resumable cells (``memgym leaderboard run --checkpoints``): a batch trained in checkpointed pieces is the run
``train`` makes in one call, and a batch cut off between pieces resumes from its last one."""

from __future__ import annotations

import pytest

from memgym.agents import checkpoints
from memgym.cli import main
from memgym.leaderboard.tracks import TMAZE

COMMON = ["leaderboard", "run", "--agent", "a2c-tiny-gru", "--preset", "smoke", "--values", "4", "--seeds", "2",
          "--steps", "8192", "--eval-episodes", "16", "--no-policies"]


def outcomes(results) -> dict:
    """Each cell's training counters and evaluation, by seed."""
    return {r["seed"]: (r["train"], r["eval"]) for r in TMAZE.records(TMAZE.store(results))}


@pytest.mark.slow
def test_a_checkpointed_batch_is_the_same_run_and_resumes_where_it_was_cut_off(tmp_path, monkeypatch, capsys):
    assert main([*COMMON, "--results", str(tmp_path / "whole")]) == 0
    folder = tmp_path / "checkpoints"
    save, pieces = checkpoints.save_checkpoint, []

    def cut_off(path, state, update, **kw):  # the process dies after writing its third piece's checkpoint
        save(path, state, update, **kw)
        pieces.append(update)
        if len(pieces) == 3:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(checkpoints, "save_checkpoint", cut_off)
    # a sitting cut off, as by Ctrl-C: the command ends with status 130 (an agent's sys.exit() would fail its cells)
    assert main([*COMMON, "--results", str(tmp_path / "cut"), "--checkpoints", str(folder)]) == 130
    assert pieces == [2, 4, 6]  # 8192 steps / (8 envs × 32 steps) = 32 updates, in pieces of ⌈32 / 20⌉ = 2
    [kept] = folder.glob("cells-*[0-9a-f].npz")
    assert not list((tmp_path / "cut").rglob("seed*.json"))
    first_sitting = checkpoints.checkpoint_seconds(kept)  # the seconds the cut-off sitting trained
    assert first_sitting > 0
    resumed = []
    monkeypatch.setattr(checkpoints, "save_checkpoint", lambda path, state, update, **kw: (
        resumed.append(update), save(path, state, update, **kw)))
    capsys.readouterr()
    assert main([*COMMON, "--results", str(tmp_path / "cut"), "--checkpoints", str(folder)]) == 0
    assert resumed[0] == 8 and resumed[-1] == 32  # it went on from the third piece, to the end
    # the progress says so, and its speed counts only the steps taken since (2 cells x 8192 steps, 6 of 32 updates)
    assert "seeds [0, 1]: resumed from its checkpoint at 19% (3,072/16,384 steps)" in capsys.readouterr().out
    assert not list(folder.iterdir())  # a trained batch leaves nothing behind
    assert outcomes(tmp_path / "cut") == outcomes(tmp_path / "whole")
    # a record's wall time counts every sitting of its batch, the cut-off one's too (2 cells share it)
    assert all(2 * r["wall_time_s"] > first_sitting for r in TMAZE.records(TMAZE.store(tmp_path / "cut")))


def test_a_checkpoint_keeps_the_seconds_trained_and_reads_without_them(tmp_path):
    import jax.numpy as jnp

    state = {"w": jnp.arange(3.0), "n": jnp.int32(4)}
    checkpoints.save_checkpoint(tmp_path / "a.npz", state, 7, seconds=12.5)
    restored, update = checkpoints.load_checkpoint(tmp_path / "a.npz", state)
    assert update == 7 and restored["w"].tolist() == [0.0, 1.0, 2.0] and int(restored["n"]) == 4
    assert checkpoints.checkpoint_seconds(tmp_path / "a.npz") == 12.5
    checkpoints.save_checkpoint(tmp_path / "b.npz", state, 7)  # as before seconds were kept
    assert checkpoints.load_checkpoint(tmp_path / "b.npz", state)[1] == 7
    assert checkpoints.checkpoint_seconds(tmp_path / "b.npz") == 0.0
    (tmp_path / "c.npz").write_bytes(b"not a checkpoint")
    assert checkpoints.checkpoint_seconds(tmp_path / "c.npz") == 0.0


@pytest.mark.slow
def test_a_lone_cell_trains_unbatched_whole_or_in_pieces_and_its_record_says_so(tmp_path):
    lone = [*COMMON[:-6], "1", *COMMON[-5:]]  # --seeds 1
    assert lone[lone.index("--seeds") + 1] == "1"
    assert main([*lone, "--results", str(tmp_path / "whole")]) == 0
    assert main([*lone, "--results", str(tmp_path / "pieces"), "--checkpoints", str(tmp_path / "checkpoints")]) == 0
    assert outcomes(tmp_path / "pieces") == outcomes(tmp_path / "whole")
    [record] = TMAZE.records(TMAZE.store(tmp_path / "whole"))
    assert (record["batch"], record["vmapped"]) == (1, False)


def test_a_lone_cell_runs_alone_unless_told_to_run_vmapped():
    import jax
    import jax.numpy as jnp

    from memgym.leaderboard.running.jax_tier import OverCells

    def cell(x, y):
        return {"sum": x + y, "scaled": 2.0 * y}

    over, batched = OverCells(cell), OverCells(cell)
    over.batched = batched.alone = None  # each may only take its own path
    out = over(jnp.array([1.0]), jnp.array([3.0]))
    assert {k: v.tolist() for k, v in out.items()} == {"sum": [4.0], "scaled": [6.0]}  # the cell axis given back
    assert batched(jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0]))["sum"].tolist() == [4.0, 6.0]
    assert [over.vmapped(n) for n in (1, 2, 3)] == [False, True, True]
    assert jax.eval_shape(over, jnp.zeros(1), jnp.zeros(1))["sum"].shape == (1,)
    forced = OverCells(cell, vmap_lone=True)
    forced.alone = None
    assert forced.vmapped(1) and forced(jnp.array([1.0]), jnp.array([3.0]))["sum"].tolist() == [4.0]


@pytest.mark.slow
def test_an_unreadable_checkpoint_is_kept_aside_and_the_batch_trains_from_its_start(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    save = checkpoints.save_checkpoint

    def cut_off(path, state, update, **kw):
        save(path, state, update, **kw)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(checkpoints, "save_checkpoint", cut_off)
    # a sitting cut off, as by Ctrl-C: the command ends with status 130 (an agent's sys.exit() would fail its cells)
    assert main([*COMMON, "--results", str(tmp_path / "r"), "--checkpoints", str(folder)]) == 130
    [kept] = folder.glob("cells-*[0-9a-f].npz")
    kept.write_bytes(kept.read_bytes()[:100])  # cut short: a disk that filled up, a file copied in part
    monkeypatch.setattr(checkpoints, "save_checkpoint", save)
    assert main([*COMMON, "--results", str(tmp_path / "r"), "--checkpoints", str(folder)]) == 0
    assert [p.name.split("-unreadable-")[0] for p in folder.iterdir()] == [kept.stem]  # set aside, not deleted
    assert all(r["status"] == "ok" for r in TMAZE.records(TMAZE.store(tmp_path / "r")))


def test_checkpoints_must_be_a_folder_and_local(tmp_path, capsys):
    afile = tmp_path / "file"
    afile.write_text("")
    assert main([*COMMON, "--results", str(tmp_path / "r"), "--checkpoints", str(afile)]) == 2
    assert "--checkpoints" in capsys.readouterr().err and not (tmp_path / "r").exists()
    assert main([*COMMON, "--results", str(tmp_path / "r"), "--checkpoints", str(tmp_path), "--backend", "ray"]) == 2
    assert "--checkpoints applies to --backend local only" in capsys.readouterr().err
