"""What an algorithm's builder gets from the run (``AgentNeeds``) and gives back (``Agent``): its
learner, the policies around its networks and what the collectors and evaluation need of them.

The learner's networks are on ``needs.device``; the policies act on CPU copies of them
(``CpuCopies``): the collector's, which the loop refreshes on each weight push, and
evaluation's, refreshed before each evaluation."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.envs.transforms import TensorDictPrimer

from trajrl.algos.learner import Learner
from trajrl.algos.memory import Memory
from trajrl.algos.networks import CpuCopies, Inputs, KeyedModule, PolicyVersion
from trajrl.algos.settings import NetworkSettings
from trajrl.base.keys import VERSION_KEY


@dataclass(frozen=True)
class AgentNeeds:
    """What the run gives an algorithm's builder (``AlgoSpec.build``)."""

    settings: Any  # the algorithm's settings (its ``AlgoSpec.settings`` dataclass)
    spaces: Any  # the environment's (``trajrl.envs.gym_envs.EnvSpaces``)
    action_spec: Any  # TorchRL's spec of the environment's actions (``spec.space.low``/``high``: bounds)
    inputs: Inputs  # how observations reach the networks (standardised, squashed)
    device: torch.device  # where the learner trains
    seed: int
    total_frames: int  # frames the run stores (PPO: learns from)
    burn_in: int  # the sampler's warm-up steps of each slice (0: none)
    episodes_per_batch: int  # whole episodes per sampled batch (``sampler.episodes_per_batch``; else 0)
    actors: int  # collecting environments (``collector.num_workers x env.num_envs``)
    actors_per_slot: int  # of them, how many one collector slot steps


@dataclass
class Agent:
    """An algorithm's learner and policies, as its builder makes them."""

    algo: Learner  # the learner: learns from batches; a checkpoint keeps its state
    greedy_policy: nn.Module  # acts deterministically (evaluation)
    policy: nn.Module  # acts during collection (``with_version``: stamps ``policy_version``)
    primer: TensorDictPrimer | None  # puts the recurrent state in every environment (None: not recurrent)
    acting: CpuCopies  # ``policy``'s networks: ``pull()`` on each weight push
    evaluated: CpuCopies  # ``greedy_policy``'s networks: ``pull()`` before each evaluation
    greedy_net: nn.Module  # the network ``greedy_policy`` acts with (export reads its ``greedy_parts()``)
    exploration: nn.Module | None = None  # an exploration module that anneals with frames (``step(frames)``)
    recurrent_net: nn.Module | None = None  # the learner's network whose state (``encoder``, ``rnn``) is stored
    version: PolicyVersion | None = None  # the behaviour policy's weight version
    per_environment: bool = False  # the policy reads each step's collector slot (``WORKER_KEY``)

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
        """The behaviour policy's own state, beside the learner's: exploration and weight version."""
        return {
            name: module
            for name, module in (("epsilon", self.exploration), ("version", self.version))
            if module is not None
        }


def with_version(agent: Agent) -> Agent:
    """The agent whose collection policy also stamps ``policy_version`` on each step."""
    version = PolicyVersion()
    policy = TensorDictSequential(agent.policy, KeyedModule(version, ["observation"], [VERSION_KEY]))
    return replace(agent, policy=policy, version=version)


def on_cpu(net: nn.Module) -> nn.Module:
    """A CPU copy of ``net`` that acts (``CpuCopies`` keeps it current)."""
    return copy.deepcopy(net).cpu()


def memory_of(a: NetworkSettings) -> Memory:
    """The memory core the settings name, with its sizes."""
    return Memory(kind=a.rnn, size=a.memory_size, context=a.memory_context, layers=a.memory_layers)


def action_bounds(action_spec: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A continuous action's ``(low, high)``, flat floats."""
    space = action_spec.space
    return space.low.float().reshape(-1), space.high.float().reshape(-1)
