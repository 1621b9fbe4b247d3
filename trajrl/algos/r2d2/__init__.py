"""Recurrent DQN, R2D2-style (``algo=r2d2``): an LSTM/GRU Q-network trained on stored slices of
episodes, n-step double-Q targets and a target network, epsilon-greedy collection.

``settings``: its settings; ``networks``: the Q-network and the acting policies; ``learner``: one update
on a batch; ``build``: all of them for a run. Registered here, as any algorithm is
(``trajrl.algos.registry``); nothing here imports torch."""

from __future__ import annotations

from typing import Any

from trajrl.algos.r2d2.settings import R2D2Settings
from trajrl.algos.registry import AlgoSpec, register_algo
from trajrl.base.kinds import CONTINUOUS, DISCRETE


def build(needs: Any) -> Any:
    from trajrl.algos.r2d2.build import build_r2d2

    return build_r2d2(needs)


register_algo(
    AlgoSpec(
        name="r2d2",
        settings=R2D2Settings,
        build=build,
        actions=(DISCRETE,),
        why_not={CONTINUOUS: "it picks the action of highest Q-value among finitely many"},
    )
)
