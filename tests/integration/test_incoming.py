"""Data from outside the collectors, written into the buffer a configuration builds: stored
as complete episodes (fresh ids, contiguous, done-terminated; slices never cross them),
or refused whole with one line and the buffer as it was.

The episodes are real ones (CartPole without velocities, the default policy acting through
a real collector), read back out of a buffer's storage as a user would, then written
without the keys a collector adds: trajectory ids, recurrent states, step counts.
"""

import os
import time

import pytest
import torch
from helpers import zero_padded
from tensordict import TensorDict

import trajrl
from trajrl.base.errors import RefusedBatch
from trajrl.base.keys import MASK_KEY, TRAJ_KEY
from trajrl.replay.audit import audit_batch, audit_storage
from trajrl.replay.episodes import find_episodes, run_steps
from trajrl.replay.states import SparseStates

STATES = ["recurrent_state_h", "recurrent_state_c"]
SAMPLERS = ["slice", "slice_without_replacement", "prioritized_slice", "episode", "random"]


@pytest.fixture(scope="module")
def read_back():
    """Complete episodes of the default policy, as ``buffer[:]`` holds them (with their
    stored states), read back out of the storage of a run's buffer."""
    with trajrl.build(trajrl.compose(["collector=sync", "debug=smoke", "sampler.state_every=null"])) as pipe:
        pipe.collector.start()
        deadline = time.monotonic() + 60
        while pipe.buffer.write_count < 1000:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pipe.collector.async_shutdown()
        stored = pipe.buffer[:]
    starts, lengths = find_episodes(stored[TRAJ_KEY], stored["is_init"], stored["next", "done"])
    _, _, index = run_steps(starts, lengths, stored.shape[0])
    return stored[index].exclude("index")


def first_episodes(steps, n):
    """The first ``n`` episodes of flat ``steps``."""
    ends = steps["next", "done"].reshape(-1).nonzero().reshape(-1)
    return steps[: int(ends[n - 1]) + 1]


def no_violations(counts: dict) -> bool:
    return not any(counts.values())


def assert_unchanged(buffer, before):
    length, written, stored = before
    assert len(buffer) == length and buffer.write_count == written
    if length:
        now = buffer[:]
        for key in stored.keys(True, True):
            assert torch.equal(now[key], stored[key]), key


def snapshot(buffer):
    return len(buffer), buffer.write_count, buffer[:].clone() if len(buffer) else None


def built(*overrides):
    return trajrl.build(trajrl.compose(["collector=sync", "debug=smoke", *overrides]))


@pytest.mark.parametrize("algo", ["r2d2", "rsac"])
def test_a_padded_batch_without_states_or_ids_stores_its_valid_steps_as_complete_episodes(read_back, algo):
    """A user's own zero-padded [5, T] batch with its mask, extended into the buffer the
    default configuration (state_every=auto: states kept apart) builds."""
    flat = first_episodes(read_back, 5).exclude(*STATES, TRAJ_KEY)
    padded = zero_padded(flat)
    assert padded.shape[0] == 5 and not padded[MASK_KEY].all()
    with built(f"algo={algo}", "env.previous_action=true") as pipe:  # read_back's inputs: the default's
        assert pipe.buffer._writer.states is not None  # the default keeps states apart from the storage
        pipe.buffer.extend(padded)
        stored = pipe.buffer[:]
        assert len(pipe.buffer) == flat.shape[0]  # exactly the valid steps
        assert torch.equal(stored["observation"], flat["observation"])  # in order, each episode contiguous
        assert no_violations(audit_storage(stored, full=False))  # complete, done-terminated, fresh ids
        assert stored[TRAJ_KEY].unique().numel() == 5
        for _ in range(50):
            batch = pipe.sequences.sample()
            assert no_violations(audit_batch(batch))
            assert (batch["step_count"][:, 0] == 0).all()  # no state kept: slices start where episodes do
        stats = pipe.algo.update(batch)
        assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())


def test_a_padded_batch_without_states_or_ids_teaches_ppo(read_back):
    """algo=ppo keeps no buffer: its collector's padded batches go to the learner as they
    are; a user's own, without ids or states, is learnt from the same way."""
    with trajrl.build(trajrl.compose(["algo=ppo", "algo.recurrent=true", "debug=smoke"])) as pipe:
        batch = next(iter(pipe.collector))
        assert batch.batch_dims == 2 and MASK_KEY in batch.keys(True)
        own = batch.exclude(TRAJ_KEY, *[k for k in batch.keys() if str(k).startswith("recurrent_state")])
        stats = pipe.algo.update(own)
        with pytest.raises(RefusedBatch, match="the batch has no 'action_log_prob': PPO learns from"):
            pipe.algo.update(own.exclude("action_log_prob"))  # not what its policy wrote: refused in one line
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_episodes_without_trajectory_ids_get_fresh_ones_after_the_buffer_wrapped(read_back, sampler):
    """Three episodes (or more, until it wraps) read back from storage, written without ("collector", "traj_ids") into a
    buffer that has wrapped around: each gets an id no stored episode has; nothing crosses."""
    flat = read_back  # with the states stored with every step
    ends = flat["next", "done"].reshape(-1).nonzero().reshape(-1)
    every_step = ["sampler.state_every=null"] if "slice" in sampler and "without" not in sampler else []
    with built(f"sampler={sampler}", "storage.capacity=600", *every_step) as pipe:
        first = flat[: int(ends[ends < 560][-1]) + 1]
        pipe.buffer.extend(first)
        rest = flat[first.shape[0] :]
        n = 3  # three episodes at least, as many more as it takes to wrap around
        while first.shape[0] + first_episodes(rest, n).shape[0] <= 600:
            n += 1
        pipe.buffer.extend(first_episodes(rest, n).exclude(TRAJ_KEY))  # wraps around
        assert pipe.buffer.write_count > 600
        stored = pipe.buffer[:]
        assert no_violations(audit_storage(stored, full=True))
        assert stored[TRAJ_KEY].max() == first[TRAJ_KEY].unique().numel() + n - 1  # n new ids, none reused
        for _ in range(50):
            assert no_violations(audit_batch(pipe.sequences.sample()))


def test_a_flat_batch_with_only_its_observations_actions_and_ends_is_stored_whole(read_back):
    """No ids, no step counts, no is_init, no ("next", "done"): episodes told apart by terminated/truncated."""
    keep = ["observation", "action", ("next", "observation"), ("next", "reward")]
    flat = first_episodes(read_back, 4)
    bare = flat.select(*keep, ("next", "terminated"), ("next", "truncated"))
    with built("sampler=episode") as pipe:
        pipe.buffer.extend(bare)
        stored = pipe.buffer[:]
        assert torch.equal(stored["step_count"], flat["step_count"])
        assert torch.equal(stored["is_init"], flat["is_init"])
        assert no_violations(audit_storage(stored, full=False)) and stored[TRAJ_KEY].unique().numel() == 4
        assert no_violations(audit_batch(pipe.sequences.sample()))


def test_an_unfinished_last_episode_is_refused_and_nothing_is_written(read_back):
    flat = first_episodes(read_back, 3)
    with built() as pipe:
        pipe.buffer.extend(first_episodes(read_back, 1))
        before = snapshot(pipe.buffer)
        with pytest.raises(RefusedBatch, match=r"its last episode \(steps \d+ to \d+ .*\) has no \('next', 'done'\)"):
            pipe.buffer.extend(flat[:-1])  # the third episode cut short
        assert_unchanged(pipe.buffer, before)
        padded = zero_padded(flat)
        padded["next", "done"][2] = False  # a padded row that does not end
        with pytest.raises(RefusedBatch, match="has no"):
            pipe.buffer.extend(padded)
        assert_unchanged(pipe.buffer, before)
        assert no_violations(audit_storage(pipe.buffer[:], full=False))


def test_a_value_that_is_not_finite_or_an_action_outside_the_task_is_refused_and_nothing_is_written(read_back):
    """Flat or padded: the refusal names the key, the batch's episode and the step, the earliest first."""
    flat = first_episodes(read_back, 3)
    with built() as pipe:
        pipe.buffer.extend(first_episodes(read_back, 1))
        before = snapshot(pipe.buffer)
        second = int(flat["is_init"].reshape(-1).nonzero()[1])  # where the batch's episode 1 begins
        nan_reward = flat.clone()
        nan_reward["next", "reward"][second + 4] = float("nan")
        nan_reward["episode_reward"][second + 4 :] = float("nan")  # as a collector's sum would follow
        inf_observation = flat.clone()
        inf_observation["observation"][2, 1] = float("inf")
        wrong_action = flat.clone()
        wrong_action["action"][second + 1] = 7
        for batch, said in [
            (nan_reward, "('next', 'reward') holds nan at step 4 of the batch's episode 1"),
            (zero_padded(nan_reward), "('next', 'reward') holds nan at step 4 of the batch's episode 1"),
            (inf_observation, "'observation' holds inf at step 2 of the batch's episode 0"),
            (wrong_action, "'action' is 7 at step 1 of the batch's episode 1, outside the task's actions (0 .. 1)"),
        ]:
            with pytest.raises(RefusedBatch) as refused:
                pipe.buffer.extend(batch)
            assert str(refused.value).startswith(said) and "nothing was written" in str(refused.value)
            assert_unchanged(pipe.buffer, before)
        padding = zero_padded(flat)
        padding["next", "reward"][~padding[MASK_KEY]] = float("nan")  # padding is never stored: not checked
        pipe.buffer.extend(padding)
        assert len(pipe.buffer) == before[0] + flat.shape[0]


def test_float64_values_are_stored_as_float32(read_back):
    """numpy's default dtype, as a user's own data often comes: cast, as the collectors write."""
    flat = first_episodes(read_back, 2)
    doubled = flat.apply(lambda value: value.double() if value.is_floating_point() else value)
    with built() as pipe:
        pipe.buffer.extend(doubled)
        stored = pipe.buffer[:]
        assert stored["observation"].dtype == stored["next", "reward"].dtype == torch.float32
        assert torch.equal(stored["observation"], flat["observation"])
        assert no_violations(audit_batch(pipe.sequences.sample()))


def test_a_continuous_action_is_checked_against_its_bounds_with_the_rounding_of_a_scaled_policy():
    from trajrl.replay.incoming import ActionRange

    actions = ActionRange((0.1, -2.0), (0.7, 2.0), discrete=False)
    inside = torch.tensor([[0.1, -2.0], [0.7 + 1e-7, 2.0], [0.4, 0.0]])  # a float32 loc + scale may round past high
    assert not actions.outside(inside).any()
    assert actions.outside(torch.tensor([[0.4, 2.01], [0.09, 0.0], [0.4, 0.0]])).tolist() == [True, True, False]


def test_a_batch_with_one_of_the_two_state_keys_is_refused_in_one_line(read_back):
    flat = first_episodes(read_back, 2)
    with built() as pipe:
        pipe.buffer.extend(flat)
        before = snapshot(pipe.buffer)
        with pytest.raises(RefusedBatch) as refused:
            pipe.buffer.extend(flat.exclude("recurrent_state_c"))
        assert "'recurrent_state_h' and not 'recurrent_state_c'" in str(refused.value)
        assert "\n" not in str(refused.value)
        assert_unchanged(pipe.buffer, before)
        wrong = flat.clone()
        wrong.set("recurrent_state_h", torch.zeros(flat.shape[0], 1, 7))
        shapes = r"'recurrent_state_h' has shape \(1, 7\) a step, the policy's is \(1, 128\)"
        with pytest.raises(RefusedBatch, match=shapes):
            pipe.buffer.extend(wrong)
        assert_unchanged(pipe.buffer, before)


def test_a_batch_without_a_key_the_storage_keeps_is_refused(read_back):
    """TorchRL's storage would keep the overwritten steps' values under that key."""
    flat = first_episodes(read_back, 2)
    with built("sampler.state_every=null") as pipe:
        pipe.buffer.extend(flat)
        before = snapshot(pipe.buffer)
        with pytest.raises(RefusedBatch, match="the batch has no 'recurrent_state_h', which the buffer keeps"):
            pipe.buffer.extend(flat.exclude(*STATES))
        assert_unchanged(pipe.buffer, before)


def test_an_error_inside_the_states_table_leaves_the_buffer_as_it_was(read_back, tmp_path, monkeypatch):
    """A write is whole or not at all: the storage's steps and counts, the states table and
    the journal are as they were before the write that failed, also after a wrap-around."""
    flat = read_back
    with built("storage.capacity=600") as pipe:
        buffer = pipe.buffer
        buffer._writer.journal_dir = str(tmp_path)  # journalled, as where worker processes write
        ends = flat["next", "done"].reshape(-1).nonzero().reshape(-1)
        head = flat[: int(ends[ends < 560][-1]) + 1]
        buffer.extend(head)
        before = snapshot(buffer)
        states = buffer._writer.states
        table_before = (states.owner.clone(), *(t.clone() for t in states.states.values()))
        write = SparseStates.write

        def fails_half_way(self, position, step_count, values):
            write(self, position, step_count, values)  # the table written, then an error
            raise RuntimeError("forced")

        monkeypatch.setattr(SparseStates, "write", fails_half_way)
        with pytest.raises(RuntimeError, match="forced"):
            buffer.extend(first_episodes(flat[head.shape[0] :], 3))  # over the oldest steps
        assert_unchanged(buffer, before)
        assert all(torch.equal(a, b) for a, b in zip(table_before, (states.owner, *states.states.values())))
        assert os.listdir(tmp_path) == []  # no journal for a recovery to write again
        monkeypatch.setattr(SparseStates, "write", write)
        buffer.extend(first_episodes(flat[head.shape[0] :], 3))  # the same write, now whole
        assert no_violations(audit_storage(buffer[:], full=len(buffer) == 600))


def test_hindsight_relabels_episodes_written_without_ids_or_states():
    """A goal task's episodes from outside (no ids, no states, no step counts): sampled and
    relabelled like the collector's."""
    cfg = ["experiment=r2d2_bit_flipping_her", "collector=sync", "debug=smoke", "sampler.her_ratio=1.0"]
    with trajrl.build(trajrl.compose(cfg)) as pipe:
        env = pipe.env_fn()
        with torch.no_grad():
            rollout = env.rollout(200, pipe.policy, break_when_any_done=False)
        env.close()
        ends = rollout["next", "done"].reshape(-1).nonzero().reshape(-1)
        outside = rollout[: int(ends[-1]) + 1].exclude(TRAJ_KEY, "step_count", *STATES, "is_init")
        pipe.buffer.extend(outside)
        for _ in range(20):
            batch = pipe.sequences.sample()
            assert no_violations(audit_batch(batch))
            assert batch["hindsight", "relabelled"].any()


def test_a_resumed_buffer_of_episodes_written_without_states_samples_them(read_back):
    flat = first_episodes(read_back, 6).exclude(*STATES, TRAJ_KEY)
    with built() as pipe:
        pipe.buffer.extend(zero_padded(flat))
        saved = pipe.buffer.state_dict()
    with built() as pipe:
        pipe.buffer.load_state_dict(saved)
        assert len(pipe.buffer) == flat.shape[0]
        for _ in range(20):
            assert no_violations(audit_batch(pipe.sequences.sample()))
        pipe.buffer.extend(first_episodes(read_back, 2))  # and takes more, with states, after it
        assert no_violations(audit_storage(pipe.buffer[:], full=False))
        assert pipe.buffer[:][TRAJ_KEY].unique().numel() == 8


def test_a_made_up_step_is_not_an_episode():
    """One step without done, written as TorchRL lays out a storage: refused outside that."""
    with built() as pipe:
        step = TensorDict({"observation": torch.zeros(1, 2), ("next", "done"): torch.zeros(1, 1, dtype=bool)}, [1])
        with pytest.raises(RefusedBatch, match="its last episode"):
            pipe.buffer.extend(step)
        assert len(pipe.buffer) == 0 and pipe.buffer.write_count == 0


def test_long_episodes_written_without_states_are_sampled_from_their_first_steps():
    """Slices of a step without a kept state start at its episode's first step (a zero
    state): never a batch that cannot be drawn, however long the episodes."""
    from helpers import episodes

    with built() as pipe:
        pipe.buffer.extend(episodes([500, 450, 480]).exclude(TRAJ_KEY))
        for _ in range(50):
            batch = pipe.sequences.sample()
            assert no_violations(audit_batch(batch)) and (batch["step_count"][:, 0] == 0).all()


def test_an_on_policy_pipeline_says_it_keeps_no_buffer_and_how_its_batches_are_learnt():
    """``pipe.buffer`` of ``algo=ppo``: one line instead of ``None.extend``'s AttributeError."""
    from trajrl.base.errors import NoReplayBuffer

    with trajrl.build(trajrl.compose(["algo=ppo", "collector=sync", "debug=smoke"])) as pipe:
        with pytest.raises(NoReplayBuffer, match=r"algo=ppo\) keeps no replay buffer: .*pipe\.algo\.update\(batch\)"):
            pipe.buffer.extend(TensorDict({}, [0]))
        assert getattr(pipe, "buffer", None) is None and pipe.on_policy
