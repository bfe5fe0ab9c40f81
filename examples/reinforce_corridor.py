"""Reinforcement learning with REINFORCE: every episode is as long as the agent takes, so every episode's graph is.

    python examples/reinforce_corridor.py [--engine reference] [--smoke]

Environment (synthetic, seeded): a corridor of 8 cells; the agent starts in cell 0 and the goal is cell 7. Each
step it moves left or right (a wall stops it at cell 0); an episode ends at the goal or after 40 steps, with reward
1 at the goal and -0.01 per step. The policy is a small MLP over a one-hot of the cell; the actions are sampled
from its softmax. Each episode records one graph node group per step taken (an episode of 7 steps is a short graph,
one of 40 a long one), and REINFORCE weights each step's log-probability by its return (with a running-mean
baseline). A random policy needs ~40 steps on average and often fails; the trained one walks straight to the goal.
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, log

CELLS, GOAL, MAX_STEPS = 8, 7, 40


def run_episode(dg, policy, rng):
    """Play one episode; return the log-probabilities of the actions taken (graph nodes) and the rewards."""
    cell, log_probs, rewards = 0, [], []
    for _ in range(MAX_STEPS):
        state = dg.zeros(CELLS)
        state[cell] = 1.0
        probs = dg.softmax(policy(state), dim=0)
        action = int(rng.random() < probs[1].item())          # sampled with numpy: same stream on both engines
        log_probs.append(dg.log(probs[action]))
        cell = max(0, cell + (1 if action == 1 else -1))
        rewards.append(1.0 if cell == GOAL else -0.01)
        if cell == GOAL:
            break
    return log_probs, rewards


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--episodes", type=int, default=300))
    dg = args.dg
    nn = dg.nn
    rng = np.random.default_rng(args.seed)
    policy = nn.Sequential(nn.Linear(CELLS, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = dg.optim.Adam(policy.parameters(), lr=0.05)
    episodes = 10 if args.smoke else args.episodes
    baseline, lengths = 0.0, []
    start = time.perf_counter()
    bar = progress(range(episodes), desc=f"reinforce ({args.engine})", enabled=not args.smoke)
    for episode in bar:
        log_probs, rewards = run_episode(dg, policy, rng)
        returns = np.cumsum(rewards[::-1])[::-1]               # return from each step on (no discount)
        baseline = 0.9 * baseline + 0.1 * returns[0]
        opt.zero_grad()
        loss = -sum(lp * float(ret - baseline) for lp, ret in zip(log_probs, returns)) / len(log_probs)
        loss.backward()                                         # a graph as long as this episode
        opt.step()
        lengths.append(len(rewards))
        set_postfix(bar, steps=np.mean(lengths[-20:]))
        if (episode + 1) % 50 == 0:
            log(bar, f"episode {episode + 1:4d}  mean steps over the last 50: {np.mean(lengths[-50:]):.1f}")
    with dg.no_grad():
        greedy, cell = [], 0
        while cell != GOAL and len(greedy) < MAX_STEPS:
            state = dg.zeros(CELLS)
            state[cell] = 1.0
            action = int(policy(state).argmax().item())
            greedy.append("R" if action else "L")
            cell = max(0, cell + (1 if action else -1))
    print(f"episode lengths: first {lengths[0]}, last {lengths[-1]}; greedy policy walks {''.join(greedy)} "
          f"({len(greedy)} steps, {'reaches' if cell == GOAL else 'misses'} the goal), "
          f"{time.perf_counter() - start:.1f} s on the {args.engine} engine")


if __name__ == "__main__":
    main()
