"""The factory: turns a checked config into real TorchRL objects, one group at a time
(``build``), and a finished run's directory back into its agent (``load_agent``).
It builds; the loops in ``trajrl.training`` run what it built."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig
from torchrl.collectors import BaseCollector
from torchrl.data import TensorDictReplayBuffer
from torchrl.envs import EnvBase

from trajrl.algos.agent import Agent
from trajrl.algos.learner import Learner
from trajrl.algos.networks import CpuCopies, PolicyVersion, PrefixStates
from trajrl.algos.registry import learns_on_policy
from trajrl.base.errors import CheckpointError, NoReplayBuffer
from trajrl.base.keys import WORKER_KEY
from trajrl.checkpoint import WHICH, LoopState, load_checkpoint, restore
from trajrl.collect.collector_env import Restarts, env_factory, eval_env_factory
from trajrl.collect.counters import WorkerCounters
from trajrl.collect.faults import RestartLimit
from trajrl.collect.watch import close_collector
from trajrl.configuration.checks import writes_fixed_frames
from trajrl.configuration.compose import validate
from trajrl.configuration.settings import PROCESS_COLLECTORS, load_run_config, settings_of
from trajrl.configuration.topology import fixed_frame_lanes
from trajrl.envs.gym_envs import env_spaces, make_gym
from trajrl.factory.agent import action_spec, build_agent
from trajrl.factory.collector import build_collector, collector_slots
from trajrl.factory.logger import build_loggers
from trajrl.factory.replay import build_buffer
from trajrl.replay.batches import SequenceSampler
from trajrl.replay.hindsight import HindsightGoals
from trajrl.replay.incoming import ActionRange

log = logging.getLogger("trajrl")


@dataclass
class Pipeline:
    """The objects of one run, built but not started. ``close()`` releases them."""

    env_fn: Callable[..., EnvBase]  # the collector's environments (``slot=i`` counts their frames)
    eval_env_fn: Callable[..., EnvBase]  # the same environment, uncounted, for evaluation (num_envs=n: a vector)
    counters: WorkerCounters | None  # what the collector's environments did (None: on a Ray cluster)
    collector: BaseCollector
    on_policy: bool  # the algorithm learns from each batch once, as the collector hands it over (no replay buffer)
    sequences: SequenceSampler | None  # the replay buffer (``buffer``) and its ``[N, T]`` batches; None: on-policy
    policy: torch.nn.Module  # the behaviour policy the collector runs (on CPU copies of the learner's networks)
    greedy_policy: torch.nn.Module  # the same network, acting deterministically (evaluation; its own copies)
    exploration: torch.nn.Module | None  # R2D2's EGreedyModule, whose epsilon anneals with frames
    algo: Learner  # R2D2, RSAC or PPO
    version: PolicyVersion  # the behaviour policy's weight version (staleness of samples)
    acting: CpuCopies | None = None  # ``policy``'s networks, pulled from the learner's on each weight push
    evaluated: CpuCopies | None = None  # ``greedy_policy``'s, pulled before each evaluation
    policy_state: dict = field(default_factory=dict)  # the behaviour policy's modules a checkpoint keeps
    loggers: list = field(default_factory=list)
    eval_max_steps: int = 1000
    resumed: LoopState | None = None  # ``resume=<run dir>``: the loop's counters at its checkpoint
    make_collector: Callable[[int], BaseCollector] | None = None  # another collector like it (a seed offset)
    collector_at: Callable[[int], BaseCollector] | None = None  # deterministic=true: one seeded for a frame count
    restart_limit: RestartLimit | None = None  # collector.max_restarts per worker, within collector.restart_window_s
    strict_episodes: int | None = None  # algo.on_policy=strict: learn from episodes of the current weights, so many

    @property
    def buffer(self) -> TensorDictReplayBuffer:
        """The replay buffer the collector writes complete episodes into (``extend`` adds a user's own);
        ``NoReplayBuffer`` (an ``AttributeError``) for an on-policy algorithm, which keeps none."""
        if self.sequences is None:
            raise NoReplayBuffer(
                "an on-policy pipeline (algo=ppo) keeps no replay buffer: each batch of complete "
                "episodes the collector hands over is learnt from once, "
                "`for batch in pipe.collector: pipe.algo.update(batch)`; an off-policy algorithm (algo=rsac, "
                "algo=r2d2) stores episodes in pipe.buffer"
            )
        return self.sequences.buffer

    @property
    def stored(self) -> TensorDictReplayBuffer | None:
        """The replay buffer, None for an on-policy algorithm (what a checkpoint saves)."""
        return self.sequences.buffer if self.sequences is not None else None

    def new_collector(self, restart: int) -> BaseCollector:
        """A collector to replace ``collector`` (shut down: a worker died), seeded anew;
        it becomes the pipeline's, which ``close()`` releases."""
        self.collector = self.make_collector(restart)
        return self.collector

    def close(self) -> None:
        close_collector(self.collector)
        for logger in self.loggers:  # those still writing (``MetricsLog`` drops one that fails)
            experiment = getattr(logger, "experiment", None)
            try:
                if hasattr(experiment, "finish"):
                    experiment.finish()
                elif hasattr(experiment, "close"):
                    experiment.close()
            except Exception as err:  # its last writes lost, the run's own files whole
                log.warning(
                    "the %s logger failed as it closed (%s: %s)", type(logger).__name__, type(err).__name__, err
                )

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def hindsight_goals(cfg: DictConfig, spaces, agent) -> HindsightGoals | None:
    """Hindsight relabelling as ``sampler.her_ratio`` asks (None at 0): the goals'
    place in the observation, and the rewards of one instance of the environment."""
    ratio = float(cfg.sampler.get("her_ratio", 0.0))
    if ratio == 0:
        return None
    env = make_gym(str(cfg.env.id), dict(cfg.env.kwargs or {}), cfg.env.get("import_module"))
    net = agent.recurrent_net
    recompute = net is not None and cfg.sampler.get("her_state") == "recompute"  # slices: episodes start at zero
    return HindsightGoals(
        spaces.goal,
        ratio,
        str(cfg.sampler.her_strategy),
        env.unwrapped.compute_reward,
        net.state_keys if net is not None else [],
        first_step_only=bool(getattr(env.unwrapped, "goal_first_step_only", False)),
        prefix_states=PrefixStates(net) if recompute else None,
    )


def build(cfg: DictConfig, run_dir: str | Path | None = None) -> Pipeline:
    """Build the pipeline for ``cfg`` (checked here unless ``validate`` already did), part by part in
    the order data flows. Loggers are made when ``run_dir`` is given."""
    cfg = validate(cfg)
    seed_everything(int(cfg.seed))
    spaces = env_spaces(cfg.env)
    log.info("env %s: %d observations, %d actions, episodes up to %d steps", *env_line(cfg, spaces))
    agent = build_agent(cfg, spaces)
    counters = frame_counters(cfg)
    env_fn = collector_envs(cfg, agent, counters)
    sequences = replay(cfg, spaces, agent, counters, run_dir)
    resumed = resume(cfg, agent, sequences)  # before the collector copies the policy into its workers
    make_collector = collector_maker(cfg, env_fn, agent, sequences)
    collector = make_collector(seed=collection_seed(cfg, resumed.frames if resumed else 0))
    log.info("collector %s (%s) x %d environments, storage %s, sampler %s", *collector_line(cfg, collector, sequences))
    loggers = (
        build_loggers(list(cfg.logger.backends), Path(run_dir), "trajrl", cfg.logger.wandb_mode) if run_dir else []
    )
    c = settings_of(cfg, "collector")
    return Pipeline(
        env_fn=env_fn,
        eval_env_fn=eval_env_factory(cfg.env, primer=agent.primer, success=spaces.goal is not None),
        counters=counters,
        collector=collector,
        on_policy=learns_on_policy(cfg.algo.name),
        sequences=sequences,
        policy=agent.policy,
        greedy_policy=agent.greedy_policy,
        exploration=agent.exploration,
        algo=agent.algo,
        version=agent.version,
        acting=agent.acting,
        evaluated=agent.evaluated,
        policy_state=agent.policy_state(),
        loggers=loggers,
        eval_max_steps=spaces.step_limit,
        resumed=resumed,
        make_collector=lambda restart: make_collector(seed=int(cfg.seed) + 1000 * restart),
        collector_at=(lambda frames: make_collector(seed=collection_seed(cfg, frames))) if cfg.deterministic else None,
        restart_limit=RestartLimit(c.max_restarts, c.restart_window_s),
        strict_episodes=int(cfg.trajs_per_batch) if cfg.algo.get("on_policy") == "strict" else None,
    )


# ---------------------------------------------------------------- build()'s parts, in its order
def seed_everything(seed: int) -> None:
    """torch's, numpy's and Python's random numbers from ``seed``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def env_line(cfg: DictConfig, spaces) -> tuple:
    return cfg.env.id, spaces.observations, spaces.actions, spaces.step_limit


def frame_counters(cfg: DictConfig) -> WorkerCounters | None:
    """What the collector's environments did, counted in a file (None on a Ray cluster's other machines)."""
    if cfg.collector.kind == "ray" and cfg.collector.get("address") is not None:
        return None
    return WorkerCounters(slots=collector_slots(cfg.collector.kind, cfg.collector.num_workers, cfg.env.num_envs))


def collector_envs(cfg: DictConfig, agent: Agent, counters: WorkerCounters | None) -> Callable[..., EnvBase]:
    """The collector's environments: the agent's inputs primed, frames counted, failures restarted."""
    c = settings_of(cfg, "collector")
    restarts = Restarts(
        c.max_restarts,
        c.restart_window_s,
        counters.fault_log.path if counters is not None else None,
        bad_steps=c.bad_steps,
    )
    return env_factory(
        cfg.env,
        primer=agent.primer,
        counters=counters,
        restarts=restarts,
        fixed_frames=writes_fixed_frames(cfg),
        stamp_slot=agent.per_environment,
        stepping=cfg.env.stepping,
        niceness=c.worker_niceness,
    )


def replay(
    cfg: DictConfig, spaces, agent: Agent, counters: WorkerCounters | None, run_dir: str | Path | None
) -> SequenceSampler | None:
    """The replay buffer and the sampler of its ``[N, T]`` batches (None: on-policy, no storage)."""
    if learns_on_policy(cfg.algo.name):
        return None
    kind, fixed_frames = cfg.collector.kind, writes_fixed_frames(cfg)
    shared, worker_key = kind in PROCESS_COLLECTORS, agent.per_environment and not fixed_frames
    lanes = fixed_frame_lanes(kind, cfg.collector.num_workers, cfg.env.num_envs, int(cfg.collector.frames_per_batch))
    return build_buffer(
        cfg.storage,
        cfg.sampler,
        shared=shared,
        run_dir=run_dir,
        reuse_files=cfg.resume is not None,
        not_stored=[*agent.not_stored(), *([WORKER_KEY] if worker_key else [])],
        journal_dir=counters.dir if shared and counters is not None else None,
        lanes=lanes[:2] if fixed_frames else None,
        hindsight=hindsight_goals(cfg, spaces, agent),
        state_shapes=agent.state_shapes(),
        actions=ActionRange.of(action_spec(cfg.env)),
        refusals_to=counters.fault_log.path if shared and counters is not None else None,
    )


def resume(cfg: DictConfig, agent: Agent, sequences: SequenceSampler | None) -> LoopState | None:
    """``resume=<run dir>``: the learner, the policy and the buffer restored from its checkpoint; the loop's
    counters there."""
    if cfg.resume is None:
        return None
    resumed = restore(
        load_checkpoint(cfg.resume, algo_name=cfg.algo.name),
        agent.algo,
        agent.policy_state(),
        sequences.buffer if sequences else None,
    )
    agent.acting.pull()
    log.info("resumed from %s at %d frames", cfg.resume, resumed.frames)
    return resumed


def collector_maker(
    cfg: DictConfig, env_fn: Callable[..., EnvBase], agent: Agent, sequences: SequenceSampler | None
) -> Callable[..., BaseCollector]:
    """``make(seed=...)``: a collector of the config's kind, writing into the buffer (or handing batches over)."""
    return partial(
        build_collector,
        settings_of(cfg, "collector"),
        env_fn,
        agent.policy,
        sequences.buffer if sequences else None,
        trajs_per_batch=cfg.trajs_per_batch,
        traj_format=cfg.traj_format,
        num_envs=int(cfg.env.num_envs),
    )


def collection_seed(cfg: DictConfig, frames: int) -> int:
    """The seed of the collector that starts at ``frames``: the run's; ``deterministic=true``, which
    renews its collector at each checkpoint (where a resumed run starts), one for each point."""
    return int(cfg.seed) + (frames if cfg.deterministic else 0)


def collector_line(cfg: DictConfig, collector: BaseCollector, sequences: SequenceSampler | None) -> tuple:
    c = cfg.collector
    storage = f"{cfg.storage.kind} x {cfg.storage.capacity}" if sequences else "none"
    return c.kind, type(collector).__name__, c.num_workers * cfg.env.num_envs, storage, cfg.sampler.kind


def load_agent(run_dir: str | Path, which: str = "latest", device: str = "auto") -> Agent:
    """The agent a finished (or stopped) run left in ``run_dir``: built from its
    ``config.yaml`` and restored from its last checkpoint (``which="latest"``) or the
    one of its best evaluation (``which="best"``). ``agent.greedy_policy`` acts
    deterministically (for evaluation, on CPU), ``agent.algo`` can keep learning (on
    ``device``, whichever the run trained on)."""
    run_dir = Path(run_dir)
    if which not in WHICH:
        raise CheckpointError(f"which={which!r}: a run keeps the checkpoints {' and '.join(WHICH)}")
    if not (run_dir / "config.yaml").exists():
        raise CheckpointError(f"{run_dir} has no config.yaml: not a trajrl run directory")
    cfg = load_run_config(run_dir)
    cfg.device = device
    cfg = validate(cfg)
    payload = load_checkpoint(run_dir, algo_name=cfg.algo.name, which=which)
    spaces = env_spaces(cfg.env)
    agent = build_agent(cfg, spaces)
    restore(payload, agent.algo, agent.policy_state(), rng=False)
    agent.acting.pull()
    agent.evaluated.pull()
    return agent
