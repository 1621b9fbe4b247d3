"""Trajectory layouts on real TorchRL buffers: flat episodes, [N, T] sequences, audits."""

import pytest
import torch
from helpers import episodes, padded_buffer, zero_padded
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import SliceSampler

from trajrl.base.keys import MASK_KEY, TRAJ_KEY
from trajrl.replay import EpisodeSampler, as_sequences, find_episodes
from trajrl.replay.audit import audit_batch, audit_storage
from trajrl.replay.episodes import run_steps


@pytest.mark.parametrize("seed", range(20))
def test_as_sequences_keeps_every_valid_step_and_an_exact_mask(seed):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 30, (int(torch.randint(1, 12, (1,), generator=gen)),), generator=gen)
    lengths[0] = 1  # length-1 sequences are the edge case
    flat = episodes(lengths.tolist())
    batch = as_sequences(flat, flat["is_init"])
    mask = batch[MASK_KEY]
    assert batch.shape == (len(lengths), int(lengths.max()))
    assert torch.equal(mask.sum(-1), lengths)
    assert audit_batch(batch) == {k: 0 for k in audit_batch(batch)}
    assert torch.equal(batch[mask]["observation"], flat["observation"])  # valid steps, in order, exactly


def test_find_episodes_merges_an_episode_written_across_the_storage_end():
    # capacity 10: episodes 0 (4 steps) and 1 (3) fill 0..6; episode 2 (5 steps) goes to 7, 8, 9 and wraps to 0, 1,
    # over episode 0's head: stored ids are [2, 2, 0, 0, 1, 1, 1, 2, 2, 2]
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=1)
    buffer.extend(episodes([4, 3], first_id=0))
    buffer.extend(episodes([5], first_id=2))
    stored = buffer[:]
    assert stored[TRAJ_KEY].tolist() == [2, 2, 0, 0, 1, 1, 1, 2, 2, 2]  # it did wrap
    starts, lengths = find_episodes(stored[TRAJ_KEY], stored["is_init"], stored["next", "done"])
    # by hand: episode 1 starts at 4 (3 steps), episode 2 at 7 (5 steps: 7, 8, 9, 0, 1); episode 0 lost its head
    assert starts.tolist() == [4, 7]
    assert lengths.tolist() == [3, 5]
    _, _, index = run_steps(starts, lengths, len(buffer))
    assert index.tolist() == [4, 5, 6, 7, 8, 9, 0, 1]
    assert stored[index][TRAJ_KEY].tolist() == [1, 1, 1, 2, 2, 2, 2, 2]
    assert stored[index]["step_count"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 3, 4]  # each in its order


def test_find_episodes_leaves_out_an_episode_whose_head_was_overwritten():
    flat = episodes([6, 3, 4])
    stored = flat[2:]  # the first episode lost its first two steps
    starts, lengths = find_episodes(stored[TRAJ_KEY], stored["is_init"], stored["next", "done"])
    assert lengths.tolist() == [3, 4]


def fill_with_wraparound(capacity=64, rounds=30, seed=0):
    gen = torch.Generator().manual_seed(seed)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=EpisodeSampler(), batch_size=8)
    next_id = 0
    for _ in range(rounds):
        lengths = torch.randint(1, 20, (3,), generator=gen).tolist()
        buffer.extend(episodes(lengths, first_id=next_id))
        next_id += len(lengths)
    assert buffer.write_count > 3 * capacity
    return buffer


def test_episode_sampler_returns_whole_stored_episodes_after_wraparound():
    buffer = fill_with_wraparound()
    for _ in range(50):
        flat = buffer.sample()
        batch = as_sequences(flat, flat["is_init"])
        assert audit_batch(batch) == {k: 0 for k in audit_batch(batch)}
        mask = batch[MASK_KEY]
        rows = torch.arange(batch.shape[0])
        assert (batch["step_count"][:, 0] == 0).all()  # each starts its episode
        assert batch["next", "done"][rows, mask.sum(-1) - 1].all()  # and ends it


def test_slice_sampler_slices_stay_inside_episodes_after_wraparound():
    buffer = fill_with_wraparound()
    buffer._sampler = SliceSampler(slice_len=7, traj_key=TRAJ_KEY, strict_length=False)
    buffer._batch_size = 7 * 16
    for _ in range(50):
        flat = buffer.sample()
        assert audit_batch(as_sequences(flat, flat["is_init"]))["slice_across_episodes"] == 0


def test_storage_audit_finds_nothing_wrong_in_a_wrapped_buffer_but_finds_broken_episodes():
    buffer = fill_with_wraparound()
    assert audit_storage(buffer[:], full=True) == {k: 0 for k in audit_storage(buffer[:], full=True)}
    broken = episodes([5, 4, 6, 3])
    broken["next", "done"][2] = True  # an episode ending twice
    broken[TRAJ_KEY][9:15] = 0  # an id reused by a later episode
    broken = torch.cat([broken[:7], broken[8:]])  # a missing step
    counts = audit_storage(broken, full=False)
    assert counts["done_inside_episode"] == 1
    assert counts["id_in_two_places"] == 1
    assert counts["steps_not_consecutive"] == 1


def test_audits_catch_steps_of_two_environments_mixed_into_one_episode():
    """What a vector env's bookkeeping could get wrong: ids, step counts and done
    flags all right, but a step's observation from another environment."""
    flat = episodes([6, 6])
    mixed = flat.clone()
    mixed["observation"][3] = flat["observation"][9]  # step 3 of the first episode is the second's step 3
    mixed["next", "observation"][3] = flat["next", "observation"][9]
    assert audit_storage(flat, full=False)["observation_not_chained"] == 0
    assert audit_storage(mixed, full=False)["observation_not_chained"] == 2  # into step 3, and out of it
    rows = as_sequences(mixed, mixed["is_init"])
    assert audit_batch(rows)["observation_not_chained"] == 2
    assert audit_batch(as_sequences(flat, flat["is_init"]))["observation_not_chained"] == 0


def test_batch_audit_catches_a_slice_across_episodes_and_a_bad_mask():
    flat = episodes([3, 3])
    batch = flat.reshape(1, 6)
    batch.set(MASK_KEY, torch.tensor([[True, True, True, True, False, True]]))
    counts = audit_batch(batch)
    assert counts["slice_across_episodes"] == 1
    assert counts["mask_not_prefix"] == 1


@pytest.mark.parametrize("seed", range(5))
def test_slice_sampler_keeps_its_episode_index_equal_to_a_search_of_the_whole_storage(seed):
    """The index the sampler updates from each write's new steps equals what a pass
    over the whole storage finds, through wrap-around, writes that end exactly at the
    storage's end, an episode as long as the storage, and a write larger than it."""
    from trajrl.replay.episodes import find_runs
    from trajrl.replay.slices import StepSliceSampler

    capacity = 50
    gen = torch.Generator().manual_seed(seed)
    sampler = StepSliceSampler(capacity, slice_len=5)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler, batch_size=20)
    sampler.follow(buffer._writer)
    next_id = 0
    plans = [
        torch.randint(1, 20, (int(torch.randint(1, 4, (1,), generator=gen)),), generator=gen).tolist()
        for _ in range(40)
    ]
    plans[10] = plans[25] = None  # episodes up to the storage's last position exactly
    plans[20], plans[30] = [capacity], [30, 40]  # one episode as long as the storage; more than all of it
    for lengths in plans:
        if lengths is None:
            to_end = capacity - buffer.write_count % capacity
            lengths = [to_end // 2, to_end - to_end // 2] if to_end > 1 else [to_end]
        buffer.extend(episodes(lengths, first_id=next_id))
        next_id += len(lengths)
        for _ in range(int(torch.randint(0, 3, (1,), generator=gen))):  # several writes between samples
            lengths = torch.randint(1, 20, (2,), generator=gen).tolist()
            buffer.extend(episodes(lengths, first_id=next_id))
            next_id += len(lengths)
        flat = buffer.sample()
        ids = buffer.storage[:].get(TRAJ_KEY).reshape(-1)
        if lengths == [capacity]:  # the last write, one episode, fills the storage: it begins where the write began
            expected = torch.tensor([buffer.write_count % capacity])
        else:
            expected = find_runs(ids)[0]
        assert torch.equal(sampler._starts, expected)
        batch = as_sequences(flat, flat["is_init"])
        assert audit_batch(batch)["slice_across_episodes"] == 0
        assert audit_batch(batch)["steps_not_consecutive"] == 0  # a slice never runs from an end into a start


def test_prioritized_slices_follow_priorities_and_stay_inside_episodes():
    from trajrl.replay.slices import StepSliceSampler

    capacity = 64
    buffer = fill_with_wraparound(capacity)
    sampler = StepSliceSampler(capacity, slice_len=5, alpha=1.0, beta=0.4)
    sampler._rng = torch.Generator().manual_seed(0)
    sampler.follow(buffer._writer)
    buffer._sampler, buffer._batch_size = sampler, 5 * 32
    flat = buffer.sample()  # every step new: equal priorities
    assert audit_batch(as_sequences(flat, flat["is_init"])) == {
        k: 0 for k in audit_batch(as_sequences(flat, flat["is_init"]))
    }
    # one step gets almost all the priority: nearly every slice must contain it
    hot = int(flat["index"][0])
    buffer.update_priority(torch.arange(capacity), torch.full((capacity,), 1e-4))
    buffer.update_priority(torch.tensor([hot]), torch.tensor([100.0]))
    batch = as_sequences(*(lambda f: (f, f["is_init"]))(buffer.sample()))
    assert audit_batch(batch)["slice_across_episodes"] == 0
    holds_hot = (batch["index"] == hot).any(-1).float().mean()
    assert holds_hot > 0.9
    assert batch["priority_weight"][batch[MASK_KEY]].max() == pytest.approx(1.0)
    # a new write takes the highest priority seen
    buffer.extend(episodes([capacity], first_id=10_000))
    buffer.sample()
    assert torch.all(sampler.priority == 100.0)


def test_a_prioritized_slice_is_weighted_by_the_probability_that_it_is_drawn():
    """Episodes of 6, 2 and 8 steps, slices of 3, priorities 1..16 (alpha 1, beta 0.5): by hand,
    a slice inside its episode is drawn from its first step only; the episode's last slice from
    each of its steps (picks past it move back to it); a 2-step episode whole from both. Its weight
    is ``(N * mean probability of those picks)^-beta`` over the batch's largest; equal priorities
    weigh every slice 1, as uniform sampling does."""
    from trajrl.replay.slices import StepSliceSampler

    lengths, slice_len, beta = [6, 2, 8], 3, 0.5
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(16), sampler=EpisodeSampler(), batch_size=8)
    buffer.extend(episodes(lengths))
    sampler = StepSliceSampler(16, slice_len=slice_len, alpha=1.0, beta=beta)
    sampler._rng = torch.Generator().manual_seed(0)
    sampler.follow(buffer._writer)
    buffer._sampler, buffer._batch_size = sampler, slice_len * 64
    buffer.sample()  # the steps are known: now their priorities
    priority = torch.arange(1.0, 17.0)
    buffer.update_priority(torch.arange(16), priority)
    probability = [float(p) / float(priority.sum()) for p in priority]
    picks_of = {}  # a slice's first storage position -> the positions whose pick draws it
    begin = 0
    for length in lengths:
        for offset in range(length):
            first = min(offset, max(0, length - slice_len))
            picks_of.setdefault(begin + first, []).append(begin + offset)
        begin += length
    by_hand = {first: (16 * sum(probability[i] for i in at) / len(at)) ** -beta for first, at in picks_of.items()}
    assert len(by_hand) == 4 + 1 + 6 and len(picks_of[13]) == 3 and len(picks_of[6]) == 2

    for _ in range(5):
        batch = as_sequences(*(lambda f: (f, f["is_init"]))(buffer.sample()))
        firsts = batch["index"][:, 0].tolist()
        expected = torch.tensor([by_hand[first] for first in firsts])
        torch.testing.assert_close(batch["priority_weight"][:, 0], expected / expected.max())
    buffer.update_priority(torch.arange(16), torch.full((16,), 2.0))
    batch = buffer.sample()
    assert torch.allclose(batch["priority_weight"], torch.ones(()))


def test_priorities_are_written_on_the_steps_learnt_from_alone():
    """A sequence's priority goes to its steps with a TD error (the learnt ones); its burn-in and
    padding keep theirs."""
    from trajrl.base.keys import TD_KEY
    from trajrl.replay.batches import SequenceSampler
    from trajrl.replay.slices import StepSliceSampler

    sampler = StepSliceSampler(16, slice_len=4, alpha=1.0, beta=0.5)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(16), sampler=sampler, batch_size=8)
    sampler.follow(buffer._writer)
    buffer.extend(episodes([4, 3, 9]))
    buffer.sample()
    buffer.update_priority(torch.arange(16), torch.full((16,), 7.0))
    nan = float("nan")
    td = torch.tensor([[nan, nan, 1.0, 3.0], [nan, 2.0, 2.0, nan]])
    mask = torch.tensor([[True, True, True, True], [True, True, True, False]])
    batch = TensorDict({TD_KEY: td, MASK_KEY: mask, "index": torch.tensor([[0, 1, 2, 3], [4, 5, 6, 0]])}, [2, 4])
    SequenceSampler(buffer, transitions=False, priority_eta=0.5).update_priority(batch)
    expected = torch.full((16,), 7.0)
    expected[[2, 3]], expected[[5, 6]] = 0.5 * 3.0 + 0.5 * 2.0, 2.0
    torch.testing.assert_close(sampler.priority, expected)


@pytest.mark.parametrize("seed", range(20))
def test_padded_to_flat_to_padded_round_trip_is_exact(seed):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 40, (int(torch.randint(1, 10, (1,), generator=gen)),), generator=gen)
    lengths[0] = 1
    flat = episodes(lengths.tolist(), first_id=100)
    padded = zero_padded(flat)
    buffer = padded_buffer()
    buffer.extend(padded)
    stored = buffer[:]
    assert len(buffer) == int(lengths.sum())  # exactly the valid steps
    assert torch.equal(stored["observation"], flat["observation"])  # flat, each episode contiguous
    assert torch.equal(stored[TRAJ_KEY], flat[TRAJ_KEY] - 100)  # fresh ids, in order, from the writer
    starts, stored_lengths = find_episodes(stored[TRAJ_KEY], stored["is_init"], stored["next", "done"])
    back = as_sequences(stored, stored["is_init"])  # and back to [N, T]
    assert torch.equal(back[MASK_KEY], padded[MASK_KEY])
    assert torch.equal(back["observation"][back[MASK_KEY]], padded["observation"][padded[MASK_KEY]])


def test_padded_write_with_ids_already_stored_gets_fresh_ids():
    buffer = padded_buffer()
    buffer.extend(zero_padded(episodes([3, 5], first_id=0)))
    buffer.extend(zero_padded(episodes([4, 2], first_id=1)))  # ids 1 (clash) and 2
    stored = buffer[:]
    assert audit_storage(stored, full=False) == {k: 0 for k in audit_storage(stored, full=False)}
    assert stored[TRAJ_KEY].unique().numel() == 4


def with_mask(padded, mask):
    padded = padded.clone()
    padded.set(MASK_KEY, mask)
    return padded


@pytest.mark.parametrize(
    "case, words",
    [
        ("missing", "without ('collector', 'mask')"),
        ("shape", "has shape (3, 5, 1), the batch (3, 5)"),
        ("empty row", "rows [1] of the mask have no valid step"),
        ("not a prefix", "rows [2] of the mask are not a prefix"),
    ],
)
def test_a_malformed_mask_is_refused_before_anything_is_written(case, words):
    from trajrl.base.errors import MalformedMask

    buffer = padded_buffer()
    padded = zero_padded(episodes([5, 2, 3]))
    mask = padded[MASK_KEY].clone()
    if case == "missing":
        bad = padded.exclude(MASK_KEY)
    elif case == "shape":
        bad = with_mask(padded, mask.unsqueeze(-1))
    elif case == "empty row":
        mask[1] = False
        bad = with_mask(padded, mask)
    else:
        mask[2] = torch.tensor([True, False, True, False, False])
        bad = with_mask(padded, mask)
    with pytest.raises(MalformedMask, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        buffer.extend(bad)
    assert len(buffer) == 0 and buffer.write_count == 0


def test_loaded_priorities_are_kept_and_only_steps_written_after_them_get_the_largest():
    """A resumed run's sampler keeps the priorities its checkpoint saved; only the steps written since the
    priorities were last brought up to date get the largest priority seen (as new steps always do)."""
    from trajrl.replay.slices import StepSliceSampler

    def prioritised(capacity=64):
        buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=5 * 4)
        sampler = StepSliceSampler(capacity, slice_len=5, alpha=1.0, beta=0.4)
        sampler.follow(buffer._writer)
        buffer._sampler = sampler
        return buffer, sampler

    saved_buffer, saved = prioritised()
    saved_buffer.extend(episodes([10, 12, 8]))
    saved_buffer.sample()
    saved_buffer.update_priority(torch.arange(30), torch.linspace(0.1, 3.0, 30))
    state = saved_buffer.state_dict()
    saved_buffer.extend(episodes([6], first_id=3))  # written after the priorities were brought up to date

    resumed_buffer, resumed = prioritised()
    resumed_buffer.load_state_dict(state)
    resumed_buffer.extend(episodes([6], first_id=3))
    resumed_buffer.sample()
    saved_buffer.sample()
    assert torch.equal(resumed.priority, saved.priority)
    assert torch.equal(resumed.priority[:30], torch.linspace(0.1, 3.0, 30))
    assert torch.all(resumed.priority[30:36] == 3.0)  # the largest seen
