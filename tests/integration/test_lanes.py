"""Fixed-frame batches (``trajs_per_batch=null``) kept in lanes, one per environment, in
TorchRL storages of ``ndim`` 2 and 3 (``trajrl.replay.lanes``), on real collectors and
worker processes.

Each layout runs until every lane has wrapped around at least 3 times while the
learner samples, then samples on to 10,000 slices: every slice audited (inside one
lane and one episode: consecutive, chained steps), the lanes audited whole, and each
slice that ends at a lane's newest step of an episode still under way is marked
truncated there (and only such slices are). Then every collector kind x ``num_envs`` x
``trajs_per_batch`` (null or 4) is refused in the line worked out for it, or builds, writes
and samples in the storage ``ndim`` worked out for it: a layout that should build and starts
being refused fails, and so does a refusal that goes or changes.
"""

import importlib.util
import re
import time

import pytest
import torch
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

import trajrl
from trajrl.base.errors import ConfigError
from trajrl.base.keys import MASK_KEY
from trajrl.checkpoint import load_checkpoint
from trajrl.collect.collector_env import make_env
from trajrl.configuration.compose import validate
from trajrl.configuration.settings import COLLECTORS
from trajrl.replay.audit import audit_batch, audit_lanes
from trajrl.replay.batches import SequenceSampler
from trajrl.replay.episodes import buffer_locked
from trajrl.replay.lanes import LaneSliceSampler, LaneWriter, PrioritizedLaneSliceSampler, in_time_order

LANE_LEN = 40
LAYOUTS = {  # name -> (overrides, storage.ndim, lanes)
    "vector_env": (["collector=sync", "env.num_envs=4"], 2, 4),
    "two_workers": (["collector=multi_async", "collector.num_workers=2"], 2, 2),
    "two_workers_over_vectors": (["collector=multi_async", "collector.num_workers=2", "env.num_envs=2"], 3, 4),
    # 4 single environments, their steps in batches as they come, interleaved: each its own lane
    "async_batched": (["collector=async_batched", "collector.num_workers=2", "env.num_envs=2"], 2, 4),
}
SLICES = 10_000


def fixed_frames(*overrides):
    return trajrl.compose(["debug=smoke", "trajs_per_batch=null", "+env.kwargs.max_episode_steps=30", *overrides])


def no_violations(counts):
    return {name: n for name, n in counts.items() if n}


def newest_cells(writer) -> set[tuple[int, ...]]:
    """The storage coordinates of each lane's newest step."""
    coords, lanes = writer.cells()
    last = torch.ones_like(lanes, dtype=torch.bool)
    last[:-1] = lanes[1:] != lanes[:-1]
    return {tuple(c) for c in coords[last].reshape(len(coords[last]), -1).tolist()}


def check_write_heads(batch, storage, newest) -> int:
    """Slices end at a lane's newest step only marked truncated (unless done there), and
    are marked truncated where the storage says not only at such a step; returns how
    many slices were cut at a write head."""
    mask = batch.get(MASK_KEY)
    last = (mask.sum(-1) - 1).unsqueeze(-1)
    index = batch.get("index").reshape(*mask.shape, -1)
    last_index = index.gather(1, last.unsqueeze(-1).expand(-1, -1, index.shape[-1])).squeeze(1)
    marked = batch.get(("next", "truncated")).reshape(mask.shape).gather(1, last).squeeze(-1)
    stored = storage[tuple(last_index.unbind(-1))]
    stored_truncated = stored.get(("next", "truncated")).reshape(-1)
    stored_done = stored.get(("next", "done")).reshape(-1)
    at_head = torch.tensor([tuple(c) in newest for c in last_index.tolist()])
    assert torch.equal(marked, stored_truncated | (at_head & ~stored_done))
    inside = batch.get(("next", "truncated")).reshape(mask.shape) & mask
    inside.scatter_(1, last, False)
    assert not inside.any(), "a slice is marked truncated before its last step"
    return int((at_head & ~stored_done).sum())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lanes_wrap_around_while_workers_write_and_slices_stay_inside_one_episode(layout):
    overrides, ndim, lanes = LAYOUTS[layout]
    cfg = fixed_frames(
        *overrides,
        "sampler=slice",
        "sampler.slice_len=8",
        "sampler.burn_in=2",
        "sampler.slices_per_batch=50",
        "collector.frames_per_batch=40",
        f"storage.capacity={LANE_LEN * lanes}",
    )
    with trajrl.build(cfg) as pipe:
        buffer, writer = pipe.buffer, pipe.buffer._writer
        slices, violations, cut = 0, {}, 0
        pipe.collector.start()
        try:
            while min(writer.counts()["written"].tolist()) < 3 * LANE_LEN + 10:  # 3 wraps of every lane, and on
                if writer.stored:
                    batch = pipe.sequences.sample()
                    violations.update(no_violations(audit_batch(batch)))
                    slices += batch.shape[0]
        finally:
            pipe.collector.async_shutdown()
        assert buffer.storage.ndim == ndim and tuple(buffer.storage._storage.shape[:ndim]) == (
            LANE_LEN,
            *writer.lane_shape,
        )
        assert writer.stored == LANE_LEN * lanes
        with buffer_locked(buffer):
            stored, lane_of = in_time_order(buffer)
        assert no_violations(audit_lanes(stored, lane_of)) == {}
        newest = newest_cells(writer)
        after = 0  # slices sampled with the heads still: their ends are checked against them
        while slices < SLICES or after < 2_000:
            batch = pipe.sequences.sample()
            violations.update(no_violations(audit_batch(batch)))
            cut += check_write_heads(batch, buffer.storage._storage, newest)
            slices, after = slices + batch.shape[0], after + batch.shape[0]
        assert violations == {}
        assert cut > 0, "no slice reached a write head"
        # learning from them: finite loss, and steps learnt from
        stats = pipe.algo.update(batch)
        assert torch.isfinite(torch.tensor(list(stats.values()))).all() and stats["learn_frac"] > 0


def test_an_episode_cut_between_writes_is_one_episode_in_its_lane():
    """A 30-step time limit and 5-step writes: every episode spans several writes, and
    is stored under one id, its steps consecutive in its lane."""
    cfg = fixed_frames(
        "collector=sync", "env.num_envs=2", "collector.frames_per_batch=10", "sampler=random", "storage.capacity=400"
    )
    with trajrl.build(cfg) as pipe:
        for _ in zip(range(30), pipe.collector):
            pass
        with buffer_locked(pipe.buffer):
            stored, lane_of = in_time_order(pipe.buffer)
    assert no_violations(audit_lanes(stored, lane_of)) == {}
    ids, steps = stored.get(("collector", "traj_ids")).reshape(-1), stored.get("step_count").reshape(-1)
    spans = [int(steps[ids == i].max()) + 1 for i in ids.unique() if bool((steps[ids == i] == 0).any())]
    assert max(spans) > 5  # an episode longer than one write, under one id


def test_a_write_longer_than_its_lane_stores_what_shorter_writes_would():
    """async_batched hands over whichever steps came first: one environment may bring
    more in one batch than its lane holds. The lane keeps the newest, exactly as four
    writes of a quarter each would have left it."""
    env = make_env("trajrl/CartPoleNoVel-v1", {"max_episode_steps": 30}, slot=0, fixed_frames=True)
    env.set_seed(0)
    steps = env.rollout(100, break_when_any_done=False)
    env.close()

    def lane(*writes):
        sampler = LaneSliceSampler(8)
        buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(LANE_LEN), writer=LaneWriter(1, 1), sampler=sampler, batch_size=32
        )
        sampler.follow(buffer._writer)
        index = torch.cat([buffer.extend(part) for part in writes])
        return buffer, index

    whole, index = lane(steps)
    quarters, _ = lane(*steps.split(25))
    assert index[:60].eq(-1).all() and index[60:].tolist() == [*range(20, 40), *range(20)]
    assert whole._writer.counts()["written"].tolist() == [100] and whole._writer.stored == LANE_LEN
    assert (whole.storage._storage == quarters.storage._storage).all()
    with buffer_locked(whole):
        stored, lane_of = in_time_order(whole)
    assert no_violations(audit_lanes(stored, lane_of)) == {}
    assert stored.get("step_count").reshape(-1).tolist() == steps[60:].get("step_count").reshape(-1).tolist()
    assert no_violations(audit_batch(SequenceSampler(whole, transitions=False, horizon=8).sample())) == {}


def test_prioritized_slices_in_lanes_follow_the_priorities_the_learner_writes():
    """sampler=prioritized_slice on fixed frames: new steps start at the largest
    priority (weights 1), priorities written back through the buffer (coordinates of a
    [L, B] storage) move where slices start, and they survive a save and load."""
    cfg = fixed_frames(
        "collector=sync",
        "env.num_envs=2",
        "sampler=prioritized_slice",
        "sampler.slice_len=4",
        "sampler.burn_in=0",
        "sampler.alpha=1.0",
        "sampler.beta=0.5",
        "collector.frames_per_batch=20",
        "storage.capacity=200",
    )
    with trajrl.build(cfg) as pipe:
        for _ in zip(range(10), pipe.collector):
            pass
        buffer, sampler = pipe.buffer, pipe.buffer._sampler
        first = pipe.sequences.sample()
        assert first.get("priority_weight").eq(1).all()
        with buffer_locked(buffer):
            coords, _ = buffer._writer.cells()
        favoured = first.get("index")[0][first.get(MASK_KEY)[0]]  # the first slice's steps
        buffer.update_priority(coords, torch.full((len(coords),), 1e-3))
        buffer.update_priority(favoured, torch.full((len(favoured),), 1e3))
        again = pipe.sequences.sample()
        violations = no_violations(audit_batch(again))
        mask, index = again.get(MASK_KEY), again.get("index")
        favoured_set = {tuple(c) for c in favoured.tolist()}
        hits = [any(tuple(c) in favoured_set for c in index[n][mask[n]].tolist()) for n in range(len(mask))]
        saved = sampler.state_dict()
        other = PrioritizedLaneSliceSampler(4, 1.0, 0.5)
        other.load_state_dict(saved)
    assert violations == {}
    assert sum(hits) >= len(hits) - 1, f"{sum(hits)} of {len(hits)} slices overlap the favoured steps"
    assert torch.equal(other.priority, sampler.priority) and other.max_priority == 1e3
    assert int((sampler.priority == 1e3).sum()) == len(favoured)


ASYNC_BATCHED_BATCHES = (
    "trajs_per_batch=4: collector=async_batched writes each episode as it completes; use trajs_per_batch=1 (or null: "
    "fixed-frame batches), or collector=multi_async to batch episodes"
)


def expected_layout(collector: str, num_envs: int, trajs: str) -> int | str:
    """What each layout must give, by hand: the refusal's line, or the storage's ``ndim``
    (complete episodes: flat; fixed frames: time, then the workers if more than one, then
    each worker's environments if more than one; async_batched's environments are single,
    each its own lane of the workers')."""
    if collector == "async_batched":
        return ASYNC_BATCHED_BATCHES if trajs == "4" else 2
    if trajs == "4":
        return 1
    workers = 1 if collector in ("sync", "async") else 2
    return 1 + (workers > 1) + (num_envs > 1)


def combinations():
    """Every collector x num_envs x trajs_per_batch. Worker processes take seconds to
    start: where the path is another default test's (complete episodes: tests/integration/test_pipeline.py;
    multi_async lanes: the wrap-around test above), the case runs with -m slow; so does
    collector=ray, an optional extra (pip install 'trajrl[ray]'), skipped without it."""
    for collector in COLLECTORS:
        for num_envs in (1, 3):
            for trajs in ("null", "4"):
                repeated = (
                    collector in ("async", "multi_sync", "multi_async")
                    and trajs == "4"
                    or (collector in ("multi_async", "ray"))
                )
                marks = [pytest.mark.slow] if repeated else []
                if collector == "ray":
                    marks.append(
                        pytest.mark.skipif(
                            importlib.util.find_spec("ray") is None,
                            reason="needs the ray extra: pip install 'trajrl[ray]'",
                        )
                    )
                expected = expected_layout(collector, num_envs, trajs)
                outcome = "refused" if isinstance(expected, str) else f"ndim={expected}"
                yield pytest.param(
                    collector,
                    num_envs,
                    trajs,
                    expected,
                    marks=marks,
                    id=f"{collector}-{num_envs}envs-trajs_per_batch={trajs}-{outcome}",
                )


@pytest.mark.parametrize("collector, num_envs, trajs, expected", combinations())
def test_each_collector_and_layout_is_refused_in_its_line_or_builds_writes_and_samples(
    collector, num_envs, trajs, expected
):
    overrides = [
        f"collector={collector}",
        f"env.num_envs={num_envs}",
        f"trajs_per_batch={trajs}",
        "collector.frames_per_batch=60",
        "storage.capacity=1200",
        "sampler=random",
    ]
    if collector in ("multi_sync", "multi_async", "ray"):
        overrides.append("collector.num_workers=2")
    if isinstance(expected, str):
        with pytest.raises(ConfigError) as refused:
            validate(fixed_frames(*overrides))
        assert str(refused.value) == expected
        return
    cfg = validate(fixed_frames(*overrides))  # a layout that must build: a ConfigError here fails the test
    assert cfg.storage.ndim == expected
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            deadline = time.monotonic() + 60
            while pipe.buffer.write_count < 200:
                assert time.monotonic() < deadline, f"{pipe.buffer.write_count} frames written in 60 s"
                time.sleep(0.05)
            batch = pipe.sequences.sample()
        finally:
            pipe.collector.async_shutdown()
    assert pipe.buffer.storage.ndim == expected
    assert no_violations(audit_batch(batch)) == {}


# random: the lane sampler of slice (slices of 1) and the transitions of the flat random
# sampler (test_cli's smoke runs), run with -m slow
@pytest.mark.parametrize("sampler", [pytest.param("random", marks=pytest.mark.slow), "slice", "prioritized_slice"])
def test_a_run_trains_on_fixed_frames_to_the_end_and_resumes(sampler, train_in):
    """A vector env of 4 on fixed frames in lanes (``storage.ndim=2``), audited, to the
    end; then resumed from the checkpoint: the lanes, their write heads, the episode ids
    (and the priorities the learner wrote) go on where they stopped. Both runs in the
    test's process, printing what the CLI prints (``resume=`` through the CLI:
    test_resume.py)."""
    overrides = (
        "collector=sync",
        f"sampler={sampler}",
        "trajs_per_batch=null",
        "env.num_envs=4",
        "storage.ndim=2",
        "audit=true",
    )
    first = train_in(*overrides, "total_frames=1200")
    first.train()
    run_dir = first.dir
    assert "audit           0 violations" in first.out, first.out[-2000:]
    stored = re.search(r"frames stored   ([\d,]+)", first.out).group(1)
    assert f"frames stepped  {stored} (0 in flight" in first.out, first.out[-2000:]
    saved = load_checkpoint(run_dir)["buffer"]["_writer"]["_lanes"]
    if sampler == "prioritized_slice":  # the learner's priorities, saved with the buffer
        priority = load_checkpoint(run_dir)["buffer"]["_sampler"]["priority"]
        assert len(priority.unique()) > 10, priority.unique()

    second = train_in(*overrides, f"resume={run_dir}", "total_frames=2400")
    second.train()
    assert "audit           0 violations" in second.out, second.out[-2000:]
    final = load_checkpoint(run_dir)
    lanes = final["buffer"]["_writer"]["_lanes"]
    assert final["frames"] >= 2400 and lanes["written"][0] > saved["written"][0]
    assert lanes["written"][0] * 4 == final["frames"]  # one worker, 4 lanes: every frame stored went on in its lane
    assert min(lanes["last_id"]) > max(saved["last_id"])  # episodes begun after the resume: new ids
