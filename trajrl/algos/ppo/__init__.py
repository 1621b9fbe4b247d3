"""Episodic PPO (``algo=ppo``), optionally recurrent: each batch is complete episodes of the current
policy, ``[N, T]`` padded with a mask; GAE per episode; advantage normalisation, losses and every
statistic over valid steps only; minibatches of whole episodes. No replay storage: each batch is learnt
from, then dropped.

``settings``: its settings; ``networks``: the actor-critic and the acting policy; ``learner``: the passes
over one batch; ``build``: all of them for a run. Registered here, as any algorithm is
(``trajrl.algos.registry``); nothing here imports torch."""

from __future__ import annotations

from typing import Any

from trajrl.algos.ppo.settings import PPOSettings
from trajrl.algos.registry import AlgoSpec, register_algo
from trajrl.base.kinds import CONTINUOUS, DISCRETE, MULTI_BINARY, MULTI_DISCRETE


def build(needs: Any) -> Any:
    from trajrl.algos.ppo.build import build_ppo

    return build_ppo(needs)


register_algo(
    AlgoSpec(
        name="ppo",
        settings=PPOSettings,
        build=build,
        on_policy=True,
        actions=(DISCRETE, CONTINUOUS, MULTI_DISCRETE, MULTI_BINARY),
        # each batch 8 complete episodes of the current policy, [N, T] and a mask; minibatches of whole
        # episodes; nothing stored
        brings={"trajs_per_batch": 8, "traj_format": "padded"},
        picks={"collector": "multi_sync", "storage": "none", "sampler": "episode"},
    )
)
