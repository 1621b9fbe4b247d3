"""What the learning recipes need: the previous action and reward as inputs, a hard target
sync every N updates, and time limits that bootstrap where terminations do not, for each algorithm."""

import copy

import pytest
import torch
from helpers import acting_rollout, collect_frames, random_episodes, slices

import trajrl
from trajrl.algos.ppo.learner import PPO
from trajrl.algos.ppo.networks import ActorCritic
from trajrl.algos.ppo.settings import PPOSettings
from trajrl.algos.r2d2.learner import R2D2
from trajrl.algos.r2d2.networks import RecurrentQNet
from trajrl.algos.r2d2.settings import R2D2Settings
from trajrl.algos.rsac.learner import RSAC
from trajrl.algos.rsac.networks import RecurrentActor, RecurrentCritic
from trajrl.algos.rsac.settings import RSACSettings
from trajrl.base.keys import MASK_KEY

PREVIOUS = ["env.previous_action=true", "env.previous_reward=true"]


def check_previous_inputs(steps, observed: int, actions: int) -> int:
    """Within each episode of ``steps`` (``[T]``, consecutive), the observation's previous
    action (one-hot) and reward are the step before's, and zero at its first step; the
    number of steps checked after a first one."""
    obs = steps["observation"]
    previous_action, previous_reward = obs[:, observed : observed + actions], obs[:, observed + actions]
    first = steps["step_count"].reshape(-1) == 0  # an episode's first step (a slice may start later in it)
    assert (previous_action[first] == 0).all() and (previous_reward[first] == 0).all()
    later = (~first[1:]).nonzero().reshape(-1) + 1
    taken = torch.nn.functional.one_hot(steps["action"][later - 1].reshape(-1).long(), actions).float()
    torch.testing.assert_close(previous_action[later], taken, rtol=0, atol=0)
    torch.testing.assert_close(previous_reward[later], steps["next", "reward"][later - 1].reshape(-1), rtol=0, atol=0)
    return len(later)


def test_the_previous_action_and_reward_are_the_step_befores_in_acting_and_in_the_stored_slices():
    cfg = trajrl.compose(
        [
            "collector=sync",
            "debug=smoke",
            "algo=r2d2",
            "algo.eps_start=0.5",
            "storage.capacity=2000",
            "+env.kwargs.max_episode_steps=40",
            *PREVIOUS,
        ]
    )
    with trajrl.build(cfg) as pipe:
        # Acting: the observation the policy acts on carries them (CartPole: 2 observed numbers, 2 actions).
        steps = acting_rollout(pipe, 300)
        assert steps["observation"].shape[-1] == 2 + 2 + 1
        assert check_previous_inputs(steps, 2, 2) > 200
        assert (steps["step_count"] == 0).sum() >= 3
        # The network reads them from the observation it stores: the learner's pass gives the acted Q-values.
        state = tuple(steps[k][:1].transpose(0, 1) for k in ("recurrent_state_h", "recurrent_state_c"))
        end = int(steps["next", "done"].reshape(-1).nonzero()[0]) + 1
        with torch.no_grad():
            q = pipe.algo.qnet.sequence_q(steps["observation"][:end].unsqueeze(0), state)[0]
        torch.testing.assert_close(q, steps["action_value"][:end], rtol=1e-5, atol=1e-5)
        # Stored slices: the same relation inside each sampled slice, zero where a slice starts its episode.
        collect_frames(pipe, 600)
        checked = 0
        for _ in range(5):
            batch = pipe.sequences.sample()
            for row in range(batch.shape[0]):
                valid = batch[row][batch[row].get(MASK_KEY)]
                checked += check_previous_inputs(valid, 2, 2)
        assert checked > 500


def test_the_episodes_time_is_observed_at_its_scales_in_acting_and_in_the_stored_slices():
    """``env.observe_time``: after the observation, ``tanh(t / s)`` for each scale (t: the steps since the
    episode began, 0 at its first step), before the previous action, wherever an observation goes."""
    cfg = trajrl.compose(
        ["collector=sync", "debug=smoke", "env.observe_time=true", "env.time_scales=[4,32]", "storage.capacity=2000"]
    )
    scales = torch.tensor([4.0, 32.0])

    def check(steps) -> int:
        t = steps["step_count"].reshape(-1, 1).float()
        torch.testing.assert_close(steps["observation"][:, 2:4], torch.tanh(t / scales), rtol=0, atol=1e-6)
        return int((t > 0).sum())

    with trajrl.build(cfg) as pipe:
        steps = acting_rollout(pipe, 300)
        assert steps["observation"].shape[-1] == 2 + 2 + 2  # CartPole's 2 numbers, the time, the previous action
        assert check(steps) > 200 and (steps["step_count"] == 0).sum() >= 3
        collect_frames(pipe, 600)
        batch = pipe.sequences.sample()
        assert sum(check(batch[row][batch[row].get(MASK_KEY)]) for row in range(batch.shape[0])) > 50


@pytest.mark.parametrize(
    ("env", "by_clock"),
    [
        (["env=gym", "env.id=trajrl/RepeatPrevious-v0"], True),  # terminated at step 50, whatever is done
        (["env=cue_memory"], True),
        (["env=cartpole_novel"], False),  # ends by failure, at any step, or cut at 500 by a time limit
        (["env=pendulum_novel"], False),  # cut at 200 by a time limit: truncated, not terminated
        (["env=gym", "env.id=trajrl/PointMassNoVel-v0"], False),
    ],
)
def test_auto_observes_the_time_where_the_episodes_end_by_a_clock(env, by_clock):
    from trajrl.configuration.compose import validate

    cfg = validate(trajrl.compose([*env, "env.observe_time=auto", "debug=smoke"]))
    assert cfg.env.observe_time is by_clock  # resolved once: the run's config.yaml holds it


def test_an_added_input_refuses_a_key_the_observation_has_already():
    import gymnasium as gym

    from trajrl.base.errors import ConfigError
    from trajrl.envs.gym_envs import with_extras

    timed = gym.wrappers.TimeAwareObservation(gym.make("CartPole-v1"), flatten=False)  # a Dict with a "time" key
    with pytest.raises(ConfigError, match="env.observe_time.*'time'"):
        with_extras(timed, time_scales=(16.0,))
    assert "previous_action" in with_extras(timed, action=True).observation_space.spaces


def test_a_goal_environment_keeps_its_goals_beside_the_previous_action():
    """The previous action joins a Dict observation as a key of its own: the goals' place in the
    flat observation still names the goals (hindsight relabels them)."""
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces

    plain = validate(trajrl.compose(["experiment=r2d2_bit_flipping_her", "debug=smoke"]))
    cfg = validate(trajrl.compose(["experiment=r2d2_bit_flipping_her", "debug=smoke", "env.previous_action=true"]))
    before, after = env_spaces(plain.env), env_spaces(cfg.env)
    n = plain.env.kwargs.n
    assert after.observations == before.observations + n + 1  # one-hot of n + 1 actions
    assert after.goal == before.goal  # achieved_goal, desired_goal come first in the Dict's key order
    assert after.goal_problem == ""


def test_the_hard_target_sync_copies_exactly_every_n_updates():
    torch.manual_seed(0)
    algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(target_tau=1.0, target_sync_every=3, lr=1e-2))
    batch = slices([12, 5, 1, 9], horizon=12)
    batch["action"] = torch.randint(2, (4, 12, 1))
    equal = lambda: all(torch.equal(a, b) for a, b in zip(algo.target.parameters(), algo.qnet.parameters()))  # noqa: E731
    last_sync = copy.deepcopy(algo.target.state_dict())
    for update in range(1, 10):
        algo.update(batch.clone())
        if update % 3 == 0:
            assert equal(), f"update {update}: the target is not a copy"
            last_sync = copy.deepcopy(algo.target.state_dict())
        else:
            assert not equal()
            assert all(torch.equal(v, last_sync[k]) for k, v in algo.target.state_dict().items())


def test_a_soft_target_moves_tau_of_the_way_at_every_update():
    torch.manual_seed(0)
    algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(target_tau=0.25, lr=1e-2))
    batch = slices([12, 5, 1, 9], horizon=12)
    batch["action"] = torch.randint(2, (4, 12, 1))
    before = [p.clone() for p in algo.target.parameters()]
    algo.update(batch)
    for old, new, online in zip(before, algo.target.parameters(), algo.qnet.parameters()):
        torch.testing.assert_close(new, old + 0.25 * (online - old))


# ---------------------------------------------------------------- time limits
def ppo_episodes(lengths, terminated: bool):
    """Whole episodes for PPO, each ending at its last step: terminated there, or cut by the time limit."""
    batch = random_episodes(lengths, obs_dim=2)
    last = batch["next", "done"].clone()
    batch["next", "terminated"] = last & terminated
    batch["next", "truncated"] = last & (not terminated)
    return batch


def ending_batch(terminated: bool):
    """Slices ending their episodes at their last valid step: terminated there, or cut by the time limit."""
    batch = slices([12, 5, 1, 9], horizon=12)
    lengths = batch.get(MASK_KEY).sum(-1)
    last = torch.zeros(4, 12, 1, dtype=torch.bool)
    last[torch.arange(4), lengths - 1] = True
    batch["action"] = torch.randint(2, (4, 12, 1), generator=torch.Generator().manual_seed(1))
    batch["next", "terminated"] = last & terminated
    batch["next", "truncated"] = last & (not terminated)
    batch["next", "done"] = last.clone()
    return batch, lengths


def with_other_last_observation(batch, lengths):
    """The same batch with another observation after each slice's last valid step."""
    other = batch.clone()
    other["next", "observation"][torch.arange(4), lengths - 1] += 3.0
    return other


def r2d2_loss(batch) -> float:
    torch.manual_seed(0)
    algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(n_step=1, gamma=0.9))
    return algo.update(batch)["loss"]


def rsac_critic_loss(batch) -> float:
    torch.manual_seed(0)
    low, high = -2 * torch.ones(1), 2 * torch.ones(1)
    actor = RecurrentActor(2, 1, [8], 8, "lstm", low, high)
    critics = torch.nn.ModuleList(RecurrentCritic(2, 1, [8], 8, "lstm") for _ in range(2))
    algo = RSAC(actor, critics, RSACSettings(gamma=0.9))
    torch.manual_seed(1)  # the actor's sampled actions: the same in both passes
    return algo.update(batch)["critic_loss"]


def ppo_advantages(batch) -> torch.Tensor:
    torch.manual_seed(0)
    algo = PPO(ActorCritic(2, 2, [8], "lstm", 8), PPOSettings(recurrent=True, gamma=0.9))
    return algo.advantages(batch)[0]


@pytest.mark.parametrize("algo_name", ["r2d2", "rsac", "ppo"])
def test_a_time_limit_bootstraps_from_the_next_observation_and_a_termination_does_not(algo_name):
    """What the learner learns at an episode's last step depends on the observation after it when
    the episode was cut by its time limit (the value there is bootstrapped), and not when it ended."""
    learn = {"r2d2": r2d2_loss, "rsac": rsac_critic_loss}.get(algo_name)
    for terminated in (True, False):
        if algo_name == "ppo":
            lengths = torch.tensor([12, 5, 1, 9])
            batch = ppo_episodes(lengths.tolist(), terminated)
            moved = not torch.equal(ppo_advantages(batch), ppo_advantages(with_other_last_observation(batch, lengths)))
        else:
            batch, lengths = ending_batch(terminated)
            moved = learn(batch.clone()) != learn(with_other_last_observation(batch, lengths))
        assert moved is (not terminated), (
            f"terminated={terminated}: the next observation {'mattered' if moved else 'did not matter'}"
        )


# ---------------------------------------------------------------- sampler.state_every=auto
@pytest.mark.parametrize(
    "overrides, expected",
    [
        ([], 30),  # slice_len 40 - burn_in 10
        (["sampler.slice_len=20", "sampler.burn_in=5"], 15),
        (["sampler=slice", "sampler.weighting=episode"], None),  # TorchRL's slices start anywhere
        (["algo.initial_state=zero"], None),  # no stored state is read
        (["trajs_per_batch=null"], None),  # fixed-frame lanes keep every step's state
        (["sampler=prioritized_slice"], 30),
    ],
)
def test_state_every_auto_keeps_a_state_where_slices_can_start_and_every_step_elsewhere(overrides, expected):
    from trajrl.configuration.compose import validate

    cfg = validate(trajrl.compose(["sampler.state_every=auto", *overrides]))
    assert cfg.sampler.state_every == expected


def test_state_every_refuses_a_word_naming_what_works():
    """A number out of its range is refused as every numeric setting's (tests/unit/test_settings.py); a word too."""
    from trajrl.base.errors import ConfigError
    from trajrl.configuration.compose import validate

    with pytest.raises(ConfigError) as refused:
        validate(trajrl.compose(["sampler.state_every=often"]))
    assert str(refused.value).startswith(
        "sampler.state_every='often': must be >= 1, null or auto; the default is auto ("
    )


# ---------------------------------------------------------------- sampler.slices_per_batch=auto
@pytest.mark.parametrize(
    "overrides, expected",
    [
        ([], 4),  # the default run: recurrent SAC
        (["sampler=prioritized_slice"], 4),
        (["algo=r2d2"], 16),
        (["algo=r2d2", "sampler=slice_without_replacement"], 16),
        (["sampler.slices_per_batch=7"], 7),  # a number is kept
    ],
)
def test_slices_per_batch_auto_is_four_for_recurrent_sac_and_sixteen_for_the_others(overrides, expected):
    from trajrl.configuration.compose import validate

    assert validate(trajrl.compose(overrides)).sampler.slices_per_batch == expected


def test_the_default_run_learns_from_batches_of_four_slices():
    """What auto stands for reaches the sampler: the learner's batches are [4, slice_len]."""
    cfg = trajrl.compose(["collector=sync", "debug=smoke", "env.num_envs=2", "collector.frames_per_batch=400"])
    with trajrl.build(cfg) as pipe:
        for _ in pipe.collector:
            if pipe.buffer.write_count >= 400:
                break
        assert tuple(pipe.sequences.sample().shape) == (4, 40)


@pytest.mark.parametrize("value, shown", [("null", "null"), ("many", "'many'")])
def test_slices_per_batch_refuses_null_and_a_word_naming_what_works(value, shown):
    """A number out of its range is refused as every numeric setting's (tests/unit/test_settings.py); null (which
    other settings take for "every step" or "none") and a word too."""
    from trajrl.base.errors import ConfigError
    from trajrl.configuration.compose import validate

    with pytest.raises(ConfigError) as refused:
        validate(trajrl.compose([f"sampler.slices_per_batch={value}"]))
    assert str(refused.value).startswith(
        f"sampler.slices_per_batch={shown}: must be >= 1 or auto; the default is auto ("
    )
