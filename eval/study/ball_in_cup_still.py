#!/usr/bin/env python3
"""Study 2's ball_in_cup_catch returns beside a policy that does nothing (issue 57).

Every evaluation episode of a cell is reset with a seed that depends only on the run seed, the
evaluation's index and the episode's index (src/rl_loop/workspace.rs, `eval_seed`), so the
random and lfs cells of one seed see the same initial states. This replays those episodes in
dm_control with the action held at 0 (the worker's reset: the task's generator re-seeded in
place) and prints, per seed and evaluation, the mean return of the 5 episodes (each episode's
return in brackets) beside the committed cells' `eval.csv`. An episode the zero policy scores
~1000 starts with the ball in the cup.

    .venv/bin/python eval/study/ball_in_cup_still.py results/study-2/cells
"""

import csv
import sys
from pathlib import Path

import numpy as np
from dm_control import suite

EVALUATIONS = 5  # frames 0, 5000, 10000, 15000, 20000
EPISODES = 5


def eval_seed(run_seed, evaluation, k):
    return (1 << 31) + (run_seed * 1_000_003 + evaluation * 1000 + k) % (1 << 31)


def zero_policy_returns(env, run_seed, evaluation):
    returns = []
    for k in range(EPISODES):
        env.task.random.seed(eval_seed(run_seed, evaluation, k))
        ts, ret = env.reset(), 0.0
        action = np.zeros(env.action_spec().shape)
        while not ts.last():
            ts = env.step(action)
            ret += ts.reward or 0.0
        returns.append(ret)
    return returns


def cell_returns(cells, encoder, seed):
    (folder,) = cells.glob(f"*-{encoder}-ball_in_cup_catch-s{seed}")
    with open(folder / "eval.csv") as f:
        return [float(row["episode_reward"]) for row in csv.DictReader(f)]


def main():
    cells = Path(sys.argv[1])
    env = suite.load("ball_in_cup", "catch", task_kwargs={"random": 0})
    print("| seed | evaluation (frames) | zero policy: mean (episodes) | random | lfs |")
    print("|---|---|---|---|---|")
    for seed in range(1, 7):
        random_cell, lfs_cell = cell_returns(cells, "random", seed), cell_returns(cells, "lfs", seed)
        for i in range(EVALUATIONS):
            still = zero_policy_returns(env, seed, i)
            episodes = ", ".join(f"{r:.0f}" for r in still)
            print(f"| {seed} | {i} ({i * 5000}) | {np.mean(still):.1f} ({episodes}) | {random_cell[i]:g} | {lfs_cell[i]:g} |")


if __name__ == "__main__":
    main()
