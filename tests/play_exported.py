"""Plays an exported trajrl agent in a process that imports only its runtime (onnxruntime for an
``.onnx`` file, torch for a ``.pt2``), gymnasium and numpy, as a deployment would::

    python play_exported.py FILE SEEDS [--steer ACTIONS.json] [--env-module MODULE]

One episode per seed (a JSON list), ``reset(seed=...)``; with ``--steer`` the environment takes those
actions (each episode's, another player's) and the agent answers the observations they lead to.
Prints ``{"actions": [...], "returns": [...], "imported": [...]}`` (JSON): ``imported`` lists the
packages of trajrl's stack that the process ended up importing (none, for a file that stands alone)."""

import argparse
import importlib
import json
import sys

import gymnasium as gym
import numpy as np


def load(path: str):
    """``(sidecar, run)``: what the file expects, and its function on numpy arrays."""
    if path.endswith(".onnx"):
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        spec = json.loads(session.get_modelmeta().custom_metadata_map["trajrl"])
        return spec, lambda *inputs: session.run(None, dict(zip(spec["inputs"], inputs)))
    import torch

    extra = {"trajrl.json": ""}
    program = torch.export.load(path, extra_files=extra).module()

    def run(*inputs):
        with torch.no_grad():
            return [out.numpy() for out in program(*(torch.as_tensor(x) for x in inputs))]

    return json.loads(extra["trajrl.json"]), run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("seeds", type=json.loads)
    parser.add_argument("--steer", default=None)
    parser.add_argument("--env-module", default=None)
    args = parser.parse_args()
    if args.env_module:
        importlib.import_module(args.env_module)
    spec, agent = load(args.file)
    if spec["env_import_module"] and spec["env_id"] not in gym.registry:  # registered by --env-module already
        importlib.import_module(spec["env_import_module"])
    steer = json.load(open(args.steer)) if args.steer else None
    env = gym.make(spec["env_id"], **spec["env_kwargs"])
    episodes, returns = [], []
    for episode, seed in enumerate(args.seeds):
        obs, _ = env.reset(seed=seed)
        state = np.zeros((1, spec["state_size"]), np.float32)
        start, reward, actions, total, done = np.ones(1, bool), 0.0, [], 0.0, False
        while not done:
            inputs = [gym.spaces.flatten(env.observation_space, obs).astype(np.float32)[None], state, start]
            if spec["previous_reward"]:
                inputs.append(np.array([reward], np.float32))
            action, state = agent(*inputs)
            actions.append(action[0].tolist())
            taken = action[0] if steer is None else np.asarray(steer[episode][len(actions) - 1], action.dtype)
            obs, reward, terminated, truncated, _ = env.step(taken)
            start[:] = False
            total += float(reward)
            done = terminated or truncated
        episodes.append(actions)
        returns.append(total)
    stack = {"trajrl", "torchrl", "tensordict", "hydra", "omegaconf"} | (
        {"torch"} if args.file.endswith(".onnx") else set()
    )
    imported = sorted(stack & {name.partition(".")[0] for name in sys.modules})
    print(json.dumps({"actions": episodes, "returns": returns, "imported": imported}))


if __name__ == "__main__":
    main()
