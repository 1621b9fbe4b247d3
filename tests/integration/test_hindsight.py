"""Hindsight relabelling of sampled slices and episodes (``trajrl.replay.hindsight``) on
the bit-flipping goal environment, a real collector and TorchRL buffer.

Each relabelled row carries one goal at every step, achieved by its own episode at or
after the row's last step (``future``), at the episode's last step (``final``) or
anywhere in it (``episode``); every reward is ``compute_reward`` of the stored achieved
goal and that goal; rows stay inside one episode (the audit); a relabelled row does not
start from the recurrent state stored with it (computed under the old goal) but from the
network's state over its episode's earlier steps with the new goal shown
(``her_state=recompute``) or from zero (``her_state=zero``); ``her_ratio=0`` changes
nothing, not even the sampler's random draws.
"""

import io

import numpy as np
import pytest
import torch
from helpers import read_metrics
from tensordict.nn import TensorDictModule

import trajrl
from trajrl.base.errors import ConfigError
from trajrl.base.keys import GOAL_KEY, MASK_KEY, RELABELLED_KEY, TRAJ_KEY
from trajrl.collect.collector_env import eval_env_factory
from trajrl.configuration.compose import validate
from trajrl.envs.gym_envs import BitFlipping
from trajrl.replay.audit import audit_batch
from trajrl.replay.hindsight import HindsightGoals
from trajrl.training.evaluator import Evaluator
from trajrl.training.progress import Progress
from trajrl.training.run import summary

BITS = 8
ACHIEVED, DESIRED = slice(BITS, 2 * BITS), slice(2 * BITS, 3 * BITS)  # Dict(observation, achieved_goal, desired_goal)


def bit_flipping(sampler="slice", *overrides):
    shape = (
        ["sampler.episodes_per_batch=32"]
        if sampler == "episode"
        else ["sampler.slice_len=4", "sampler.burn_in=0", "sampler.slices_per_batch=64"]
    )
    return trajrl.compose(
        [
            "debug=smoke",
            "algo=r2d2",
            "env=bit_flipping",
            f"env.kwargs.n={BITS}",
            "collector=sync",
            "collector.frames_per_batch=64",
            f"sampler={sampler}",
            *shape,
            *overrides,
        ]
    )


def filled(cfg, batches: int = 12):
    """The pipeline of ``cfg`` with ``batches`` collector batches written."""
    pipe = trajrl.build(cfg)
    for _ in zip(range(batches), pipe.collector):
        pass
    return pipe


def stored_episodes(buffer) -> dict[int, dict[str, torch.Tensor]]:
    """Each stored episode's steps, by id: step counts and achieved goals after each step."""
    stored = buffer.storage[: len(buffer.storage)]
    ids = stored.get(TRAJ_KEY).reshape(-1)
    steps = stored.get("step_count").reshape(-1)
    achieved = stored.get(("next", "observation"))[:, ACHIEVED]
    return {int(i): {"steps": steps[ids == i], "achieved": achieved[ids == i]} for i in ids.unique()}


@pytest.mark.parametrize(
    "sampler, strategy",
    [
        ("slice", "future"),
        ("prioritized_slice", "future"),
        ("slice", "final"),
        ("slice", "episode"),
        ("episode", "future"),
    ],
)
def test_relabelled_rows_carry_one_goal_their_episode_achieved_and_rewards_recomputed(sampler, strategy):
    zero = [] if sampler == "episode" else ["sampler.her_state=zero"]  # whole episodes start from zero anyway
    cfg = bit_flipping(sampler, "sampler.her_ratio=1.0", f"sampler.her_strategy={strategy}", *zero)
    with filled(cfg) as pipe:
        episodes = stored_episodes(pipe.buffer)
        batches = [pipe.sequences.sample() for _ in range(5)]
    env = BitFlipping(BITS)
    checked = 0
    for batch in batches:
        assert {k: v for k, v in audit_batch(batch).items() if v} == {}
        mask = batch.get(MASK_KEY)
        assert batch.get(RELABELLED_KEY).reshape(mask.shape)[mask].all()  # her_ratio=1
        goal = batch.get(GOAL_KEY)
        obs, next_obs = batch.get("observation"), batch.get(("next", "observation"))
        for row in range(mask.shape[0]):
            valid = mask[row]
            row_goal = goal[row][valid]
            assert (row_goal == row_goal[0]).all(), "one goal at every step of a row"
            assert torch.equal(obs[row][valid][:, DESIRED], row_goal)  # shown at every step ...
            assert torch.equal(next_obs[row][valid][:, DESIRED], row_goal)  # ... and after it
            episode = episodes[int(batch.get(TRAJ_KEY)[row, 0])]
            last_step = int(batch.get("step_count")[row][valid][-1])
            allowed = {
                "future": episode["steps"] >= last_step,
                "episode": episode["steps"] >= 0,
                "final": episode["steps"] == episode["steps"].max(),
            }[strategy]
            assert (episode["achieved"][allowed] == row_goal[0]).all(-1).any(), (
                f"row {row}: its goal is not what its episode achieved ({strategy})"
            )
            expected = env.compute_reward(next_obs[row][valid][:, ACHIEVED].numpy(), row_goal.numpy(), {})
            reward = batch.get(("next", "reward"))[row][valid].reshape(-1).numpy()
            np.testing.assert_array_equal(reward, expected)
            checked += 1
        for key in ("recurrent_state_h", "recurrent_state_c"):  # computed under the old goal: zero
            assert batch.get(key).abs().sum() == 0
    assert checked >= 5 * 16


@pytest.mark.parametrize("first_step_only", [False, True], ids=["goal_at_every_step", "goal_first_step_only"])
def test_a_relabelled_slice_starts_from_the_state_the_network_has_over_its_episode_under_the_new_goal(first_step_only):
    """her_state=recompute (the default): the online network run from a zero state over the
    stored steps of the slice's episode before it, each showing the new goal (the first
    only, for an environment that shows its goal there only), gives the slice's initial
    state (checked here with one LSTM call per row over that prefix)."""
    memory = ["+env.kwargs.goal_first_step_only=true"] if first_step_only else []
    cfg = bit_flipping("slice", "sampler.her_ratio=1.0", "sampler.state_every=null", *memory)  # every step's state
    with filled(cfg) as pipe:
        stored = pipe.buffer.storage[: len(pipe.buffer.storage)]
        batch = pipe.sequences.sample()
        net = pipe.algo.qnet
        ids, steps = stored.get(TRAJ_KEY).reshape(-1), stored.get("step_count").reshape(-1)
        checked = 0
        for row in range(batch.shape[0]):
            first = int(batch.get("step_count")[row, 0])
            h, c = batch.get("recurrent_state_h")[row, 0], batch.get("recurrent_state_c")[row, 0]
            if first == 0:
                assert h.abs().sum() == 0 and c.abs().sum() == 0
                continue
            episode = ids == batch.get(TRAJ_KEY)[row, 0]
            prefix = stored[episode & (steps < first)]
            prefix = prefix[prefix.get("step_count").reshape(-1).argsort()]
            obs = prefix.get("observation").clone()
            shown = prefix.get("step_count").reshape(-1) == 0 if first_step_only else slice(None)
            obs[shown, DESIRED] = batch.get(GOAL_KEY)[row, 0]
            with torch.no_grad():
                _, (h_ref, c_ref) = net.rnn(net.encoder(obs).unsqueeze(0))
            torch.testing.assert_close(h, h_ref[:, 0])
            torch.testing.assert_close(c, c_ref[:, 0])
            index = batch.get("index")[row, 0]
            if not torch.equal(prefix.get("observation")[0, DESIRED], batch.get(GOAL_KEY)[row, 0]):  # a new goal
                assert not torch.allclose(h, stored.get("recurrent_state_h")[index])  # not the one stored
            checked += 1
    assert checked >= 10


def test_a_partial_ratio_relabels_that_share_and_leaves_the_rest_as_stored():
    cfg = bit_flipping("slice", "sampler.her_ratio=0.5", "sampler.state_every=null")  # every step's state stored
    with filled(cfg) as pipe:
        stored = pipe.buffer.storage[: len(pipe.buffer.storage)]
        batches = [pipe.sequences.sample() for _ in range(10)]
    rows = torch.cat([b.get(RELABELLED_KEY)[:, 0, 0] for b in batches])
    assert 0.35 < rows.float().mean() < 0.65
    for batch in batches:  # rows not relabelled: exactly what the storage holds
        kept = ~batch.get(RELABELLED_KEY)[:, 0, 0]
        index = batch.get("index")[kept]
        for key in ("observation", ("next", "reward"), "recurrent_state_h"):
            assert torch.equal(batch.get(key)[kept], stored.get(key)[index])
        assert batch.get("recurrent_state_h")[kept].abs().sum() > 0


def test_her_ratio_zero_gives_exactly_the_batch_without_hindsight():
    """A HindsightGoals at ratio 0 draws nothing: the same seed samples the same batch."""
    cfg = bit_flipping("prioritized_slice")
    with filled(cfg) as pipe:
        sampler = pipe.buffer._sampler
        spaces_goal = trajrl.envs.gym_envs.env_spaces(cfg.env).goal
        batches = []
        for hindsight in (None, HindsightGoals(spaces_goal, 0.0, "future", BitFlipping(BITS).compute_reward)):
            sampler.hindsight = pipe.sequences.hindsight = hindsight
            torch.manual_seed(0)
            batches.append(pipe.sequences.sample())
    plain, with_ratio_zero = batches
    assert set(plain.keys(True, True)) == set(with_ratio_zero.keys(True, True))
    assert (plain == with_ratio_zero).all()


def test_the_goal_shown_at_the_first_step_only_is_relabelled_there_only():
    cfg = bit_flipping("episode", "+env.kwargs.goal_first_step_only=true", "sampler.her_ratio=1.0")
    with filled(cfg) as pipe:
        assert pipe.sequences.hindsight.first_step_only
        batch = pipe.sequences.sample()
    mask, goal = batch.get(MASK_KEY), batch.get(GOAL_KEY)
    desired = batch.get("observation")[..., DESIRED]
    assert torch.equal(desired[:, 0], goal[:, 0])  # whole episodes: the first step shows the new goal
    assert desired[:, 1:][mask[:, 1:]].abs().sum() == 0  # and no later step shows any
    assert batch.get(("next", "observation"))[..., DESIRED][mask].abs().sum() == 0


@pytest.mark.parametrize(
    "problem, words",
    [
        ("no_reward", ["env.id='BadGoal-v0'", "has no compute_reward", "env=bit_flipping"]),
        ("unbatched", ["env.id='BadGoal-v0'", "shape () for a batch of 2 goals", "sampler.her_ratio=0"]),
    ],
)
def test_a_goal_environment_hindsight_cannot_relabel_is_refused_in_one_line(problem, words):
    cfg = trajrl.compose(
        [
            "debug=smoke",
            "env=gym",
            "env.id=BadGoal-v0",
            "env.import_module=space_envs",
            f"+env.kwargs.problem={problem}",
            "sampler.her_ratio=0.5",
            "sampler.slice_len=1",
            "sampler.burn_in=0",
        ]
    )
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    message = str(refused.value)
    assert "\n" not in message and all(word in message for word in words), message
    validate(
        trajrl.compose(
            [
                "debug=smoke",
                "env=gym",
                "env.id=BadGoal-v0",
                "env.import_module=space_envs",
                f"+env.kwargs.problem={problem}",
                "sampler.slice_len=1",
                "sampler.burn_in=0",
            ]
        )
    )


@pytest.mark.parametrize("reach, expected", [(True, 1.0), (False, 0.0)])
def test_evaluation_reports_the_share_of_episodes_that_end_at_their_goal(reach, expected):
    """One bit: a policy that flips it only when it differs from the goal always ends
    there; one that flips it only when it equals the goal never does."""
    cfg = trajrl.compose(["env=bit_flipping", "env.kwargs.n=1"])
    differs = lambda obs: obs[..., 1] != obs[..., 2]  # noqa: E731  (observation, achieved_goal, desired_goal)
    act = (lambda obs: torch.where(differs(obs), 0, 1)) if reach else (lambda obs: torch.where(differs(obs), 1, 0))
    policy = TensorDictModule(act, in_keys=["observation"], out_keys=["action"])
    evaluator = Evaluator(
        eval_env_factory(cfg.env, success=True), policy, episodes=8, seed=0, max_steps=5, env_id=cfg.env.id
    )
    try:
        stats = evaluator()
    finally:
        evaluator.close()
    assert stats["success"] == expected and stats["length"] == 1.0


def at_goal(env) -> bool:
    """Whether the bits are the goal's, or the point within ``radius`` of it (from the environment's state)."""
    task = env.unwrapped
    if isinstance(task, BitFlipping):
        return bool(np.array_equal(task.bits, task.goal))
    return bool(np.linalg.norm(task.point - task.goal) < task.radius)


def played_by_hand(run_dir, cfg) -> tuple[float, float]:
    """The best agent (best.pt: debug=smoke evaluates once, at the end) played greedily in a plain loop over the
    episodes the run's evaluation played: ``(share that ended at the goal, mean return)``. Those episodes: each
    environment seeded ``(seed + 10,000) x episodes + i`` by a reset (TorchRL's ``set_seed``), then the one after."""
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from trajrl.envs.gym_envs import gym_options, make_gym

    agent = trajrl.load_agent(run_dir, which="best")
    episodes = int(cfg.loop.eval_episodes)
    env = make_gym(str(cfg.env.id), dict(cfg.env.kwargs or {}), None, **gym_options(cfg.env))
    shapes = agent.state_shapes()
    reached, returns = [], []
    for i in range(episodes):
        env.reset(seed=(int(cfg.seed) + 10_000) * episodes + i)
        obs, _ = env.reset()
        state = {key: torch.zeros(1, *shape) for key, shape in shapes.items()}
        start, done, total = True, False, 0.0
        while not done:
            step = TensorDict(
                {"observation": torch.as_tensor(obs)[None], "is_init": torch.tensor([[start]]), **state}, [1]
            )
            with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
                step = agent.greedy_policy(step)
            state = {key: step.get(("next", key)) for key in shapes}
            obs, reward, terminated, truncated, _ = env.step(step.get("action")[0].numpy())
            start, done, total = False, terminated or truncated, total + float(reward)
        reached.append(at_goal(env))
        returns.append(total)
    env.close()
    return float(np.mean(reached)), float(np.mean(returns))


@pytest.mark.parametrize(
    "task",
    [
        ["algo=r2d2", "env=bit_flipping", "env.kwargs.n=4", "sampler.slice_len=4", "sampler.burn_in=0"],
        ["algo=rsac", "env=point_reach", "sampler.slice_len=10", "sampler.burn_in=2"],
        ["algo=rsac", "env=bit_flipping", "env.kwargs.n=4", "sampler.slice_len=4", "sampler.burn_in=0"],
    ],
    ids=["r2d2-bit_flipping", "rsac-point_reach", "sac_discrete-bit_flipping"],
)
def test_a_run_with_hindsight_logs_the_relabelled_share_and_the_success_rate(task, tmp_path):
    """Trained in the test's process: what the CLI would print (the metrics rows, then the summary) and write. The
    success rate logged is the one the agent it kept gets in a plain loop over the same episodes (16: a rate other
    than 0 or 1 is likely)."""
    run_dir = tmp_path / "run"
    cfg = trajrl.compose([*task, "sampler.her_ratio=0.25", "debug=smoke", "audit=true", "loop.eval_episodes=16"])
    printed = io.StringIO()
    final = trajrl.train(cfg, run_dir, progress=Progress(int(cfg.total_frames), stream=printed))
    out = printed.getvalue() + summary(final)
    assert "eval success    " in out and "audit           0 violations" in out, out[-2000:]
    rows = read_metrics(run_dir)
    relabelled = [float(r["sample/relabelled_frac"]) for r in rows if r.get("sample/relabelled_frac")]
    assert relabelled and 0.1 < sum(relabelled) / len(relabelled) < 0.4, relabelled
    success, mean_return = played_by_hand(run_dir, validate(cfg))
    assert float(rows[-1]["eval/return"]) == pytest.approx(mean_return), "another agent or other episodes"
    assert float(rows[-1]["eval/success"]) == pytest.approx(success), rows[-1]["eval/success"]
