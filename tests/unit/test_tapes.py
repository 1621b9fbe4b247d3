"""Tapes (``sampler=tape``): whole episodes laid end to end, each step at most once, targets that
never cross an episode's end, and learners that learn on a tape what they learn on rows."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import episodes, padded_buffer
from torch import nn

from trajrl.algos.memory import Memory
from trajrl.algos.r2d2.learner import R2D2
from trajrl.algos.r2d2.networks import RecurrentQNet
from trajrl.algos.r2d2.settings import R2D2Settings
from trajrl.algos.rsac.learner import RSAC
from trajrl.algos.rsac.networks import RecurrentActor, RecurrentCritic
from trajrl.algos.rsac.settings import RSACSettings
from trajrl.algos.sequences import n_step_return
from trajrl.base.keys import CLOSING_KEY, MASK_KEY, TD_KEY
from trajrl.replay.episodes import as_sequences
from trajrl.replay.tapes import TapeSampler, as_tape

LENGTHS = [5, 1, 7, 3, 12, 2]


def stored(lengths=LENGTHS, capacity=1_000):
    buffer = padded_buffer(capacity, sampler=TapeSampler(capacity))
    buffer.sampler.follow(buffer._writer)
    buffer.extend(episodes(lengths))
    return buffer


def cut_into_episodes(tape):
    """The tape's cells as ``(steps, closing cell)`` per episode, checking the layout on the way."""
    mask, is_init = tape[MASK_KEY][0], tape["is_init"][0].reshape(-1)
    out, begin = [], 0
    for cell in (~mask).nonzero().reshape(-1).tolist():
        assert is_init[begin] and not is_init[begin + 1 : cell + 1].any(), "is_init only at each episode's first step"
        out.append((tape[0, begin:cell], tape[0, cell]))
        begin = cell + 1
    assert begin == mask.numel(), "the tape ends with a closing cell"
    return out


@pytest.mark.parametrize("asked", [20, 30, 500])
def test_a_tape_holds_the_steps_asked_for_each_at_most_once_whole_episodes_in_order(asked):
    buffer = stored()
    for seed in range(5):
        buffer.sampler._rng = torch.Generator().manual_seed(seed)
        tape = as_tape(buffer.sample(asked))
        mask = tape[MASK_KEY][0]
        assert int(mask.sum()) == min(asked, sum(LENGTHS))
        assert tape["index"][0][mask].unique().numel() == int(mask.sum()), "no step twice"
        parts = cut_into_episodes(tape)
        for i, (steps, closing) in enumerate(parts):
            ids = steps["collector", "traj_ids"].reshape(-1)
            assert (ids == ids[0]).all(), "one episode between two closing cells"
            count = steps["step_count"].reshape(-1)
            assert torch.equal(count, torch.arange(len(count))), "its steps from the first, in order"
            whole = bool(steps["next", "done"][-1])
            assert whole or i == len(parts) - 1, "only the last episode is cut"
            assert torch.equal(closing["observation"], steps[-1]["next", "observation"]), "the observation after it"
            assert not closing[MASK_KEY] and not closing["is_init"].any()
        assert len(parts) == len(set(int(s["collector", "traj_ids"][0]) for s, _ in parts)), "no episode twice"


def test_a_run_whose_start_was_overwritten_is_left_off_the_tape():
    buffer = stored([6, 4, 4], capacity=12)  # the 14 steps wrap: the first episode's first 2 are overwritten
    tape = as_tape(buffer.sample(100))
    assert int(tape[MASK_KEY].sum()) == 8
    assert set(tape["collector", "traj_ids"][0].reshape(-1).tolist()) == {1, 2}


def test_targets_on_a_tape_stop_at_each_episode_end_terminated_or_not():
    """n-step targets on a tape equal those of each episode alone: a terminated last step does not
    bootstrap, a truncated (or cut) one bootstraps from the observation after it."""
    lengths, ends = [3, 1, 4, 2], ["terminated", "truncated", "terminated", "cut"]
    cells = [n + 1 for n in lengths]
    mask = torch.cat([torch.arange(c) < c - 1 for c in cells]).unsqueeze(0)
    terminated = torch.zeros_like(mask, dtype=torch.float)
    at, starts = 0, []
    for n, c, end in zip(lengths, cells, ends):
        starts.append(at)
        terminated[0, at + n - 1] = float(end == "terminated")
        at += c
    reward, bootstrap = torch.randn(mask.shape), torch.randn(mask.shape)
    gamma = 0.9
    for n in (1, 2, 5):
        tape = n_step_return(reward, terminated, bootstrap, mask, gamma, n)
        for first, length in zip(starts, lengths):
            part = slice(first, first + length)
            alone = n_step_return(
                reward[:, part],
                terminated[:, part],
                bootstrap[:, part],
                torch.ones(1, length, dtype=torch.bool),
                gamma,
                n,
            )
            torch.testing.assert_close(tape[:, part], alone)
    last = [s + n - 1 for s, n in zip(starts, lengths)]
    one_step = n_step_return(reward, terminated, bootstrap, mask, gamma, 1)[0]
    for i, end in zip(last, ends):
        want = reward[0, i] + (0.0 if end == "terminated" else gamma * bootstrap[0, i])
        torch.testing.assert_close(one_step[i], want)


def learning_batch(lengths, obs_dim=2, seed=0):
    """Flat episodes with what the learners read (actions, rewards, zero stored states)."""
    gen = torch.Generator().manual_seed(seed)
    flat = episodes(lengths, terminal=True)
    flat["observation"], flat["next", "observation"] = (
        flat["observation"][:, :obs_dim],
        flat["next", "observation"][:, :obs_dim],
    )
    size = flat.shape[0]
    flat.set("action", torch.randint(2, (size,), generator=gen))
    flat.set(("next", "reward"), torch.randn(size, 1, generator=gen))
    flat["next", "terminated"][flat["next", "done"].nonzero()[-1, 0]] = False  # the last one truncated
    flat.set("recurrent_state", torch.zeros(size, 1, 2 * 4))
    return flat


def rows_and_tape(flat, lengths):
    rows = as_sequences(flat.clone(), flat["is_init"])
    cells = torch.tensor(lengths) + 1
    first = torch.tensor(lengths).cumsum(0) - torch.tensor(lengths)
    episode = torch.repeat_interleave(torch.arange(len(lengths)), cells)
    offset = torch.arange(int(cells.sum())) - torch.repeat_interleave(cells.cumsum(0) - cells, cells)
    closing = offset == torch.tensor(lengths)[episode]
    sample = flat[first[episode] + torch.minimum(offset, torch.tensor(lengths)[episode] - 1)]
    sample.set("is_init", (offset == 0).unsqueeze(-1))
    sample.set(CLOSING_KEY, closing)
    return rows, as_tape(sample)


def test_the_recurrent_dqn_learns_on_a_tape_what_it_learns_on_rows_of_the_same_episodes():
    lengths = [6, 1, 9, 4]
    rows, tape = rows_and_tape(learning_batch(lengths), lengths)
    torch.manual_seed(0)
    qnet = RecurrentQNet(2, 2, [8], 8, Memory("lru", size=4))
    settings = R2D2Settings(n_step=3, initial_state="zero")
    on_rows, on_tape = R2D2(copy.deepcopy(qnet), settings), R2D2(copy.deepcopy(qnet), settings)
    for _ in range(3):
        a, b = on_rows.update(rows), on_tape.update(tape)
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
        assert a["q_mean"] == pytest.approx(b["q_mean"], rel=1e-5, abs=1e-6)
    torch.testing.assert_close(rows[TD_KEY][rows[MASK_KEY]], tape[TD_KEY][tape[MASK_KEY]])
    assert tape[TD_KEY][~tape[MASK_KEY]].isnan().all(), "nothing learnt on a closing cell"


def test_recurrent_sac_discrete_learns_on_a_tape_what_it_learns_on_rows_of_the_same_episodes():
    lengths = [6, 1, 9, 4]
    rows, tape = rows_and_tape(learning_batch(lengths), lengths)
    torch.manual_seed(0)
    memory = Memory("ffm", size=2, context=2)
    actor = RecurrentActor(2, 2, [8], 8, memory, None, None)
    critics = nn.ModuleList(RecurrentCritic(2, 2, [8], 8, memory, discrete=True) for _ in range(2))
    settings = RSACSettings(n_step=2, initial_state="zero")
    on_rows = RSAC(copy.deepcopy(actor), copy.deepcopy(critics), settings)
    on_tape = RSAC(copy.deepcopy(actor), copy.deepcopy(critics), settings)
    for _ in range(3):
        a, b = on_rows.update(rows), on_tape.update(tape)
        for key in ("critic_loss", "actor_loss", "entropy", "q_mean"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), key


def test_a_core_that_cannot_restart_inside_a_sequence_refuses_a_tape():
    lengths = [3, 2]
    _, tape = rows_and_tape(learning_batch(lengths), lengths)
    tape.set("recurrent_state_h", torch.zeros(*tape.shape, 1, 8))
    tape.set("recurrent_state_c", torch.zeros(*tape.shape, 1, 8))
    with pytest.raises(ValueError, match="cannot restart inside a sequence"):
        R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings()).update(tape)


def test_the_audit_passes_a_tape_and_counts_what_breaks_one():
    from trajrl.replay.audit import audit_tape

    buffer = stored()
    tape = as_tape(buffer.sample(25))
    assert sum(audit_tape(tape).values()) == 0
    closing = (~tape[MASK_KEY][0]).nonzero().reshape(-1)
    broken = tape.clone()
    broken["observation"][0, closing[0]] += 1.0  # a closing cell that is not the next observation
    assert audit_tape(broken)["closing_not_next_observation"] == 1
    cut = tape.clone()
    cut[MASK_KEY][0, closing[0] - 1] = False  # an episode's last step dropped: it no longer ends done
    assert audit_tape(cut)["episode_cut_inside_tape"] >= 1
    twice = tape.clone()
    twice["index"][0, 1] = twice["index"][0, 0]
    assert audit_tape(twice)["step_twice"] == 1
