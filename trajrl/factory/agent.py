"""Agent factory: the networks, the acting policies around them, and the learner, for
each algorithm of ``trajrl.configuration.settings.ALGOS``.

The learner's networks are on ``device`` (``learner_device``); the policies act on CPU
copies of them (``CpuCopies``): the collector's, which the loop refreshes on each weight
push, and evaluation's, refreshed before each evaluation."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.envs.transforms import TensorDictPrimer

from trajrl.algos.learner import Learner
from trajrl.algos.memory import Memory
from trajrl.algos.networks import CpuCopies, Inputs, KeyedModule, PolicyVersion
from trajrl.algos.ppo import PPO, ActorCritic, make_actor
from trajrl.algos.r2d2 import R2D2, RecurrentQNet, make_policies
from trajrl.algos.rsac import RSAC, RecurrentActor, RecurrentCritic, make_policy, twin_critics
from trajrl.base.keys import VERSION_KEY
from trajrl.collect.collector_env import make_env, observation_stats
from trajrl.configuration.settings import NetworkSettings, PPOSettings, R2D2Settings, RSACSettings, settings_of
from trajrl.envs.gym_envs import EnvSpaces
from trajrl.envs.spaces import CONTINUOUS, DISCRETE, MULTI_BINARY
from trajrl.factory.collector import collector_slots


@dataclass
class Agent:
    algo: Learner  # R2D2, RSAC or PPO
    greedy: nn.Module  # acts deterministically (evaluation)
    explore: nn.Module  # acts during collection (stamps ``policy_version``)
    egreedy: nn.Module | None  # R2D2's EGreedyModule, annealed with frames (None: no epsilon)
    primer: TensorDictPrimer | None  # puts the recurrent state in every environment (None: not recurrent)
    acting: CpuCopies  # ``explore``'s networks: ``pull()`` on each weight push
    evaluated: CpuCopies  # ``greedy``'s networks: ``pull()`` before each evaluation
    version: PolicyVersion | None = None  # the behaviour policy's weight version
    recurrent_net: nn.Module | None = None  # the learner's network whose state (``encoder``, ``rnn``) the policy stores
    greedy_net: nn.Module | None = None  # the network ``greedy`` acts with (the CPU copy ``evaluated`` refreshes)

    def not_stored(self) -> list:
        """What the policy writes on each step that learning never reads: its layers'
        outputs (Q-values included: the environments count the non-greedy actions)
        and the recurrent state after the step (a slice starts from the state
        before its first step, which is stored)."""
        after = [("next", key) for key in self.primer.primers.keys()] if self.primer is not None else []
        return ["embed", "features", "action_value", "chosen_action_value", *after]

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """The recurrent state the policy stores with each step: each key's shape (none: not recurrent)."""
        if self.primer is None:
            return {}
        return {key: tuple(spec.shape) for key, spec in self.primer.primers.items()}

    def policy_state(self) -> dict[str, nn.Module]:
        """The behaviour policy's own state, beside the learner's: epsilon and weight version."""
        return {
            name: module
            for name, module in (("epsilon", self.egreedy), ("version", self.version))
            if module is not None
        }


def with_version(agent: Agent) -> Agent:
    """The agent whose collection policy also stamps ``policy_version`` on each step."""
    version = PolicyVersion()
    explore = TensorDictSequential(agent.explore, KeyedModule(version, ["observation"], [VERSION_KEY]))
    return replace(agent, explore=explore, version=version)


def learner_device(device: str) -> torch.device:
    """The device the ``device`` setting names (``auto``: cuda where there is one)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def on_cpu(net: nn.Module) -> nn.Module:
    """A CPU copy of ``net`` that acts (``CpuCopies`` keeps it current)."""
    return copy.deepcopy(net).cpu()


def memory_of(a: NetworkSettings) -> Memory:
    """The memory core the settings name, with its sizes."""
    return Memory(
        kind=a.rnn,
        size=a.memory_size,
        context=a.memory_context,
        layers=a.memory_layers,
        forget_bias=a.forget_bias,
        chrono_horizon=a.chrono_horizon,
        chrono_spread=a.chrono_spread,
    )


def action_spec(env_cfg):
    probe_env = make_env(env_cfg.id, dict(env_cfg.kwargs or {}), env_cfg.import_module)
    spec = probe_env.action_spec
    probe_env.close()
    return spec


def planned_updates(cfg) -> int:
    """The updates a replay learner plans over the run: one per ``1 / loop.updates_per_frame`` frames
    after the warm-up (``algo.lr_end`` is reached at the last)."""
    return int(max(0, cfg.total_frames - cfg.loop.warmup_frames) * cfg.loop.updates_per_frame)


def build_r2d2(a: R2D2Settings, cfg, spaces: EnvSpaces, inputs: Inputs, device: torch.device) -> Agent:
    """Recurrent Q-network, its policies and the R2D2 learner."""
    qnet = RecurrentQNet(
        spaces.parts,
        spaces.actions,
        list(a.encoder_sizes),
        a.hidden_size,
        memory_of(a),
        inputs,
        dueling=a.dueling,
        layer_norm=a.layer_norm,
    ).to(device)
    spec = action_spec(cfg.env)
    acting, evaluated = on_cpu(qnet), on_cpu(qnet)
    spread = None
    if a.eps_spread > 0:  # each collecting environment its own epsilon
        workers, num_envs = int(cfg.collector.num_workers), int(cfg.env.num_envs)
        actors = workers * num_envs  # each collector slot steps actors / slots of them
        per_slot = actors // collector_slots(cfg.collector.kind, workers, num_envs)
        spread = dict(spread=a.eps_spread, actors=actors, per_slot=per_slot)
    _, explore, egreedy, core = make_policies(acting, spec, a.eps_start, a.eps_end, a.eps_decay_frames, spread)
    greedy = make_policies(evaluated, spec, a.eps_start, a.eps_end, a.eps_decay_frames)[0]
    algo = R2D2(
        qnet,
        a,
        burn_in=int(cfg.sampler.get("burn_in", 0)),
        planned_updates=planned_updates(cfg),
    )
    shown = algo.target if a.eval_network == "target" else qnet  # target: the slowly averaged network is evaluated
    return Agent(
        algo,
        greedy,
        explore,
        egreedy,
        core.make_tensordict_primer(),
        CpuCopies([(acting, qnet)]),
        CpuCopies([(evaluated, shown)]),
        recurrent_net=qnet,
        greedy_net=evaluated,
    )


def build_ppo(a: PPOSettings, cfg, spaces: EnvSpaces, inputs: Inputs, device: torch.device) -> Agent:
    """Actor-critic (recurrent or not), its acting policy and the PPO learner."""
    spec = action_spec(cfg.env)
    bounds = None
    if spaces.action_kind == CONTINUOUS:
        bounds = (spec.space.low.float().reshape(-1), spec.space.high.float().reshape(-1))
    net = ActorCritic(
        spaces.parts,
        spaces.actions,
        list(a.encoder_sizes),
        memory_of(a) if a.recurrent else None,
        a.hidden_size,
        inputs,
        bounds,
        a.layer_norm,
        categories=spaces.action_parts,
        binary=spaces.action_kind == MULTI_BINARY,
    ).to(device)
    acting, evaluated = on_cpu(net), on_cpu(net)
    policy, core = make_actor(acting, spec)
    algo = PPO(
        net,
        a,
        minibatch_episodes=int(cfg.sampler.episodes_per_batch),
        total_frames=int(cfg.total_frames),
        seed=int(cfg.seed),
    )
    return Agent(
        algo,
        make_actor(evaluated, spec)[0],
        policy,
        None,
        core.make_tensordict_primer() if core is not None else None,
        CpuCopies([(acting, net)]),
        CpuCopies([(evaluated, net)]),
        greedy_net=evaluated,
    )


def build_rsac(a: RSACSettings, cfg, spaces: EnvSpaces, inputs: Inputs, device: torch.device) -> Agent:
    """Recurrent actor, twin recurrent critics, the acting policy and the SAC learner
    (SAC-discrete where the actions are ``Discrete``)."""
    discrete = spaces.action_kind == DISCRETE
    low = high = None
    if not discrete:
        space = action_spec(cfg.env).space
        low, high = space.low.float().reshape(-1), space.high.float().reshape(-1)
    sizes = list(a.encoder_sizes)
    parts, action_dim = spaces.parts, spaces.actions
    memory = memory_of(a)
    actor = RecurrentActor(parts, action_dim, sizes, a.hidden_size, memory, low, high, inputs, a.layer_norm).to(device)
    critics = twin_critics(
        lambda: RecurrentCritic(
            parts, action_dim, sizes, a.hidden_size, memory, inputs, a.layer_norm, discrete, a.dueling
        ),
        shared=a.critic_core != "separate",
    ).to(device)
    if a.critic_core == "acting":
        actor.read_critic(critics[0])
    acting, evaluated = on_cpu(actor), on_cpu(actor)
    policy, core = make_policy(acting, entropy=a.entropy_penalty > 0)
    algo = RSAC(
        actor,
        critics,
        a,
        burn_in=int(cfg.sampler.get("burn_in", 0)),
        planned_updates=planned_updates(cfg),
    )
    return Agent(
        algo,
        make_policy(evaluated)[0],
        policy,
        None,
        core.make_tensordict_primer(),
        CpuCopies([(acting, actor)]),
        CpuCopies([(evaluated, actor)]),
        recurrent_net=actor,
        greedy_net=evaluated,
    )


#: How each algorithm of the registry is built.
BUILDERS: dict[str, Callable[..., Agent]] = {"r2d2": build_r2d2, "rsac": build_rsac, "ppo": build_ppo}


def build_agent(cfg, spaces: EnvSpaces) -> Agent:
    """The agent ``cfg.algo.name`` names (``cfg``: a checked config) for an environment of ``spaces``."""
    settings = settings_of(cfg, "algo")
    stats = (
        observation_stats(cfg.env, 2_000, int(cfg.seed), step_timeout_s=float(cfg.loop.stall_timeout_s))
        if settings.normalize_observations
        else (None, None)
    )
    inputs = Inputs(*stats, squash=settings.squash_observations)
    return with_version(BUILDERS[settings.name](settings, cfg, spaces, inputs, learner_device(cfg.device)))
