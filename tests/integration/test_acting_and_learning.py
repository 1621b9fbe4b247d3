"""Learners against what a real collector wrote while acting: the recurrent state, the
log-probabilities and the Q-values each learner recomputes are the ones the acting policy used
(collectors and runs: kept out of tests/unit, which starts no process and trains nothing)."""

import pytest
import torch
from helpers import Trained, acting_rollout, padded_buffer, rows_of
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import SliceSampler

import trajrl
from trajrl.base.keys import LOG_PROB_KEY, MASK_KEY, TRAJ_KEY
from trajrl.collect.assembly import EpisodeCollector
from trajrl.collect.collector_env import env_factory
from trajrl.replay import as_sequences
from trajrl.replay.audit import audit_batch, audit_storage


def collect(collector_class, env_fn, policy, num_envs: int, rollouts: int):
    """Run ``rollouts`` rollouts into a fresh buffer; return it and the size of each write."""
    torch.manual_seed(0)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000))
    writes = []
    extend = buffer.extend
    buffer.extend = lambda data: writes.append(data.shape[0]) or extend(data)
    collector = collector_class(
        env_fn, policy, frames_per_batch=16 * num_envs, total_frames=-1, trajs_per_batch=4, replay_buffer=buffer
    )
    collector.set_seed(0)
    collector.reset()  # the first observation from the seeded environments too
    for i, _ in enumerate(collector):
        if i + 1 == rollouts:
            break
    collector.shutdown()
    return buffer, writes


@pytest.mark.parametrize("num_envs", [1, 5])
def test_episode_collector_writes_what_torchrl_writes(num_envs):
    cfg = trajrl.compose(
        [
            "debug=smoke",
            "algo=r2d2",
            "collector=sync",
            "+env.kwargs.max_episode_steps=30",
            "sampler.slice_len=20",
            "algo.eps_start=0.5",
        ]
    )
    with trajrl.build(cfg) as pipe:
        policy, primer = pipe.policy, pipe.env_fn.args[3]
    env_fn = env_factory(cfg.env, primer=primer, num_envs=num_envs)
    theirs, their_writes = collect(Collector, env_fn, policy, num_envs, rollouts=60)
    ours, our_writes = collect(EpisodeCollector, env_fn, policy, num_envs, rollouts=60)
    assert our_writes == their_writes and len(our_writes) > 10
    assert ours.write_count == theirs.write_count > 200
    stored_theirs, stored_ours = theirs[:], ours[:]
    assert set(stored_ours.keys(True, True)) == set(stored_theirs.keys(True, True))
    for key in stored_theirs.keys(True, True):
        assert torch.equal(stored_ours.get(key), stored_theirs.get(key)), key
    assert not any(audit_storage(stored_ours, full=False).values())
    ends = stored_ours["next", "truncated"] & stored_ours["next", "done"]
    assert ends.any() and (stored_ours["next", "terminated"] & stored_ours["next", "done"]).any()


def test_padded_batches_from_a_real_collector_are_stored_as_complete_episodes():
    """Collector(trajs_per_batch, traj_format="padded") batches, extended as they come."""
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, InitTracker, StepCounter, TransformedEnv

    env = TransformedEnv(GymEnv("CartPole-v1"), InitTracker())
    env.append_transform(StepCounter())
    collector = Collector(env, None, frames_per_batch=100, total_frames=3_000, trajs_per_batch=6, traj_format="padded")
    buffer = padded_buffer(capacity=800, sampler=SliceSampler(slice_len=9, traj_key=TRAJ_KEY, strict_length=False))
    buffer._batch_size = 9 * 32
    valid = 0
    for batch in collector:
        assert batch.batch_dims == 2 and not batch[MASK_KEY].all()
        valid += int(batch[MASK_KEY].sum())
        buffer.extend(batch)
    collector.shutdown()
    assert buffer.write_count == valid > 3 * 800  # valid steps only; wrapped 3 times
    assert audit_storage(buffer[:], full=True) == {k: 0 for k in audit_storage(buffer[:], full=True)}
    for _ in range(20):
        flat = buffer.sample()
        assert audit_batch(as_sequences(flat, flat["is_init"]))["slice_across_episodes"] == 0


@pytest.mark.parametrize(
    "collector, traj_format, rnn",
    [
        ("sync", "padded", "lstm"),
        ("sync", "cat", "lstm"),
        ("multi_sync", "padded", "lstm"),
        ("multi_sync", "cat", "lstm"),
        ("sync", "padded", "lru"),
        pytest.param("sync", "cat", "ffm", marks=pytest.mark.slow),  # FFM's acting: tests/unit/test_memory.py
    ],
)
def test_the_learner_recomputes_the_log_probs_the_recurrent_policy_acted_with(collector, traj_format, rnn):
    """Whole episodes from a zero state reproduce what the acting core did step by step,
    so the first PPO ratio on fresh episodes is exactly 1."""
    from trajrl.replay.episodes import as_sequences

    cfg = trajrl.compose(
        [
            f"collector={collector}",
            "algo=ppo",
            "algo.recurrent=true",
            f"algo.rnn={rnn}",
            "env=cartpole_novel",
            f"traj_format={traj_format}",
            "trajs_per_batch=6",
            "debug=smoke",
        ]
    )
    with trajrl.build(cfg) as pipe:
        batch = next(iter(pipe.collector))
    if traj_format == "cat":
        batch = as_sequences(batch, batch.get("is_init"))
    mask = batch.get(MASK_KEY)
    assert mask.shape[0] == 6 and not mask.all()
    with torch.no_grad():
        logits = pipe.algo.net.actor.sequence(batch.get("observation"))
        log_prob = torch.distributions.Categorical(logits=logits).log_prob(batch.get("action").reshape(mask.shape))
    torch.testing.assert_close(log_prob[mask], batch.get(LOG_PROB_KEY).reshape(mask.shape)[mask])


@pytest.mark.parametrize("collector", ["multi_sync", pytest.param("sync", marks=pytest.mark.slow)])  # one path
def test_strict_on_policy_learns_only_from_episodes_of_the_current_weights(collector, tmp_path):
    """Weights are pushed after every batch while episodes run: without strict mode some
    learnt step was taken by older weights (batch/staleness_max > 0); with it none, on
    every batch, and the episodes a push cut are dropped and counted: the frames learnt from
    and dropped are frames the environments stepped (their own count, ``counted_envs``)."""
    from counted_envs import counted, stepped

    maxima = {}
    for on_policy in ("mixed", "strict"):  # in this process: what is tested is the episodic loop, not the CLI
        counts = tmp_path / on_policy / "counts"
        run = Trained(
            tmp_path / on_policy,
            *counted(counts),
            "algo=ppo",
            f"collector={collector}",
            f"algo.on_policy={on_policy}",
            "total_frames=3000",
            "loop.log_every_frames=100",
        )
        run.train()
        rows = rows_of(run.dir)
        maxima[on_policy] = [row["batch/staleness_max"] for row in rows if "batch/staleness_max" in row]
        last = rows[-1]
        dropped = last.get("batch/frames_dropped_stale", 0)
        if collector != "sync":  # sync: PPO's loop steps it in the main thread, where Counted-v0 counts nothing
            frames_stepped = sum(process.frames for process in stepped(counts).values())
            assert last["collect/frames_stepped"] == frames_stepped, last
            assert last["frames"] + dropped <= frames_stepped and last["buffer/frames_in_flight_dropped"] >= 0, last
        if on_policy == "strict":
            assert last["batch/episodes_dropped_stale"] > 0 and dropped > 0
            assert f"{int(dropped):,} dropped: a weight push cut their episodes" in run.out, run.out[-2000:]
    assert len(maxima["strict"]) >= 5 and max(maxima["strict"]) == 0, maxima
    assert max(maxima["mixed"]) > 0, maxima


@pytest.mark.parametrize("rnn", ["lstm", "lru", "ffm"])
def test_learning_pass_reproduces_the_acting_policy_q_values(rnn):
    """From the stored state at any step, the sequence pass gives the Q-values the
    policy acted on: the stored state is the one the policy used, zero at is_init; a linear
    core's one pass over several episodes (restarting at each) gives them too."""
    cfg = trajrl.compose(["collector=sync", "debug=smoke", "algo=r2d2", "algo.eps_start=0.3", f"algo.rnn={rnn}"])
    with trajrl.build(cfg) as pipe:
        steps = acting_rollout(pipe, 300)
        qnet = pipe.algo.qnet
        ends = steps["next", "done"].reshape(-1).nonzero().reshape(-1).tolist()
        assert len(ends) >= 3
        for start in (0, 3, ends[0] + 1, ends[1] + 4):
            stop = next(e for e in ends if e >= start) + 1
            state = tuple(steps[k][start : start + 1].transpose(0, 1) for k in qnet.state_keys)
            with torch.no_grad():
                q = qnet.sequence_q(steps["observation"][start:stop].unsqueeze(0), state)[0]
            torch.testing.assert_close(q, steps["action_value"][start:stop], rtol=1e-5, atol=1e-5)
        if rnn != "lstm":
            whole = slice(0, ends[2] + 1)
            zero = tuple(torch.zeros_like(steps[k][:1]).transpose(0, 1) for k in qnet.state_keys)
            starts = steps["is_init"][whole].reshape(1, -1)
            with torch.no_grad():
                q = qnet.sequence_q(steps["observation"][whole].unsqueeze(0), zero, starts)[0]
            torch.testing.assert_close(q, steps["action_value"][whole], rtol=1e-5, atol=1e-5)


def test_the_actor_starts_from_the_state_it_stored_while_acting():
    """From the stored state at any step, the learner's actor pass gives the actions
    the policy took (deterministic acting): the stored state is the one it used."""
    from helpers import acting_rollout
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    cfg = trajrl.compose(["experiment=rsac_pendulum_novel", "collector=sync", "debug=smoke"])
    with trajrl.build(cfg) as pipe:
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            steps = acting_rollout(pipe, 260)
        actor = pipe.algo.actor
        for start in (0, 17, 150, 201):
            stop = min(start + 30, 200 if start < 200 else 260)
            batch = steps[start:stop].unsqueeze(0)
            with torch.no_grad():
                features = pipe.algo.actor_features(batch["observation"], batch, 0, None, None)
                action, _ = actor.head.sample(features, deterministic=True)
            torch.testing.assert_close(action[0], steps["action"][start:stop], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rnn", ["lstm", pytest.param("lru", marks=pytest.mark.slow)])  # lru: test_r2d2, test_memory
def test_sac_discrete_learner_reproduces_the_actions_taken_from_the_stored_state(rnn):
    """SAC-discrete acting on CartPole (its preset: the previous action observed too): from the
    state stored at any step, the learner's actor picks the actions the policy took."""
    from helpers import acting_rollout
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    cfg = trajrl.compose(["experiment=rsac_cartpole_novel", "collector=sync", "debug=smoke", f"algo.rnn={rnn}"])
    with trajrl.build(cfg) as pipe:
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            steps = acting_rollout(pipe, 120)
            starts = steps["is_init"].reshape(-1).nonzero().reshape(-1).tolist() + [120]
            actor = pipe.algo.actor
            for begin, end in zip(starts[:-1], starts[1:]):
                start = (begin + end) // 2  # mid-episode: only the stored state carries what came before
                batch = steps[start:end].unsqueeze(0)
                with torch.no_grad():
                    features = pipe.algo.actor_features(batch["observation"], batch, 0, None, None)
                    torch.testing.assert_close(features[0], steps["features"][start:end], rtol=1e-5, atol=1e-5)
                    torch.testing.assert_close(actor.head(features)[0], steps["action"][start:end])
    assert len(starts) > 2  # several episodes checked
