"""Checkpoints: written atomically in the run directory, restored into an agent that
acts exactly like the trained one, and refused when truncated or foreign."""

import pytest
import torch

import trajrl
from trajrl.base.errors import CheckpointError
from trajrl.checkpoint import checkpoint_path, load_checkpoint


@pytest.mark.parametrize(
    "overrides", [["algo=r2d2"], ["experiment=rsac_pendulum_novel"], ["algo=ppo", "algo.recurrent=true"]]
)
def test_a_run_leaves_a_checkpoint_that_restores_its_agent(overrides, tmp_path):
    cfg = trajrl.compose([*overrides, "debug=smoke", "loop.checkpoint_every_frames=1000"])
    final = trajrl.train(cfg, run_dir=tmp_path / "run")
    saved = load_checkpoint(tmp_path / "run")
    assert saved["frames"] == final["frames"] and saved["algo"]["updates"] == final["train/updates"] > 0
    assert not list((tmp_path / "run" / "checkpoints").glob("*.tmp"))

    def weights(algo):
        return {
            (name, key): tensor
            for name, value in algo.state_dict().items()
            if isinstance(value, dict) and "state" not in value  # networks, not optimisers
            for key, tensor in value.items()
        }

    agent = trajrl.load_agent(tmp_path / "run")
    assert agent.algo.updates == saved["algo"]["updates"]
    restored, wanted = (
        weights(agent.algo),
        {(n, k): t for n, v in saved["algo"].items() if isinstance(v, dict) and "state" not in v for k, t in v.items()},
    )
    assert restored.keys() == wanted.keys()  # networks, and statistics (recurrent SAC's reward RMS: numbers)
    assert all(torch.equal(v, wanted[k]) if torch.is_tensor(v) else v == wanted[k] for k, v in restored.items())
    # Its policies act on CPU copies that hold the restored weights.
    tensors = [w for w in wanted.values() if torch.is_tensor(w)]
    for policy in (agent.greedy_policy, agent.policy):
        acting = list(policy.parameters())
        assert acting and all(any(torch.equal(p.detach(), w) for w in tensors) for p in acting)
    # A new agent (same config, not restored) differs: the comparison above can fail.
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    cfg = validate(cfg)
    spaces = env_spaces(cfg.env)
    torch.manual_seed(123)
    new = weights(build_agent(cfg, spaces).algo)
    assert any(not torch.equal(new[k], wanted[k]) for k in wanted)


class Anything:
    """An arbitrary object: a checkpoint holding one must not be unpickled."""


def test_a_truncated_or_foreign_checkpoint_is_refused(tmp_path):
    cfg = trajrl.compose(["debug=smoke"])
    trajrl.train(cfg, run_dir=tmp_path / "run")
    path = checkpoint_path(tmp_path / "run")
    good = path.read_bytes()

    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="truncated, corrupt or not a trajrl checkpoint"):
        load_checkpoint(path)

    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(CheckpointError, match="is not a trajrl checkpoint"):
        load_checkpoint(path)

    torch.save({"format": "trajrl-checkpoint/1", "payload": Anything()}, path)  # never unpickled
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(path)

    path.write_bytes(good)
    with pytest.raises(CheckpointError, match="holds an algo=rsac learner, not algo=ppo"):
        load_checkpoint(path, algo_name="ppo")
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "elsewhere")
