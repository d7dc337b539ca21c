"""comparisons/matched_tmaze.py: memgym's learning curves beside another implementation's, as a table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "comparisons" / "matched_tmaze.py"


def test_the_table_counts_seeds_that_hold_the_cue_from_both_formats(tmp_path):
    run = tmp_path / "memgym-run"
    run.mkdir()
    # memgym's metrics.csv: two seeds, rows every 50K steps; seed 0 solves from 150K on, seed 1 never does and
    # reaches no junction in its first 200K steps
    rows = ["seed,update,env_steps,episodes,successes,success_rate,mean_return,mean_length,entropy,policy_loss,value_loss"]
    for seed in (0, 1):
        for i in range(1, 7):
            wins = (10 if i >= 3 else 5) if seed == 0 else (0 if i <= 4 else 5)
            rows.append(f"{seed},{i},{50_000 * i},10,{wins},{wins / 10},0,64,1,0,0")
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    # the authors' driver's CSV: one seed per file, success as a rate; the last 100K steps at 0.95
    other = tmp_path / "theirs-s1.csv"
    other.write_text("env_steps,mean_return,success_rate,episodes,mean_length,wall_s,steps_per_s\n"
                     "100000,-5,0.5,20,64,1,1\n200000,-3,0.95,20,64,1,1\n300000,-3,0.95,40,64,1,1\n")
    plot = tmp_path / "curves.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "--group", f"mine={run}", "--group",
                           f"theirs={tmp_path / 'theirs-s*.csv'}", "--plot", str(plot)],
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert "| mine | 1/2 | 1/2 | 0.2M, – | 0.75 |" in lines  # 100K buckets: seed 0 0.5, 1, 1; seed 1 0, 0, 0.5
    assert "| theirs | 1/1 | 1/1 | 0.2M | 0.95 |" in lines
    assert plot.stat().st_size > 0


def test_a_pattern_that_matches_nothing_is_named(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--group", f"x={tmp_path / 'none*.csv'}"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "none*.csv" in done.stderr


def test_the_authors_code_driver_names_its_flags_without_their_code_installed():
    """agalite_tmaze.py imports the authors' code only when it runs; its flags map onto their hydra keys."""
    done = subprocess.run([sys.executable, str(REPO / "comparisons" / "agalite_tmaze.py"), "--help"],
                          capture_output=True, text=True, check=True)
    for flag, key in (("--nu", "trainer.seq_model.kernel.nu"), ("--corridor", "task.corridor_len"),
                      ("--lr", "trainer.optimizer.learning_rate")):
        assert flag in done.stdout and key in done.stdout


def test_a_file_that_is_no_learning_curve_is_named(tmp_path):
    (tmp_path / "broken.csv").write_text("step,score\n1,2\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--group", f"x={tmp_path / 'broken.csv'}"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "broken.csv is not a learning curve" in done.stderr
