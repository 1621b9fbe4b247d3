"""``trajrl export <run dir>``: a finished run's greedy agent as one file that acts with torch
alone (``--format torch``: a ``torch.export`` program, ``.pt2``) or with onnxruntime alone
(``--format onnx``), its memory included: no trajrl, TorchRL, tensordict or Hydra where it is
deployed. The file holds one function, batched, in recurrent PPO's ``predict`` convention::

    action, state = agent(observation, state, episode_start[, reward])

- ``observation`` ``[B, obs]`` float32: ``gymnasium.spaces.flatten(env.observation_space, obs)``
  of the environment the run trained on, as gymnasium makes it;
- ``state`` ``[B, S]`` float32: the agent's memory (its core's state, the previous action where the
  run observed it, and the steps since the episode began where it observed its time), zeros to
  start; the first step of an episode starts from zeros whatever is passed; the next step's state
  comes back with the action;
- ``episode_start`` ``[B]`` bool: the observation is its episode's first (it comes from ``reset``);
- ``reward`` ``[B]`` float32, only where the run observed its previous reward (``env.previous_reward``):
  the reward the last step returned (ignored at an episode's start);
- ``action``: the environment's action for each of the ``B``: ``[B]`` int64 (``Discrete``), ``[B, n]``
  float32 (``Box``), ``[B, n]`` int64 (``MultiDiscrete``, ``MultiBinary``).

Inside it is everything trajrl's greedy policy does: the inputs' standardisation, the episode's
time (counted in the state) and the previous action and reward as inputs, the memory core, the
greedy choice and the action's scaling to its bounds. What the file expects (spaces, sizes, inputs)
travels inside it as JSON (``SIDECAR``):
``torch.export.load(path, extra_files={"trajrl.json": ""})`` fills it in, and an ONNX model keeps it in
its metadata under ``trajrl``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch
from torch import nn

from trajrl.base.errors import ConfigError
from trajrl.base.files import replaced_whole

#: The formats, and the suffix of each one's file.
FORMATS = {"onnx": ".onnx", "torch": ".pt2"}
#: Where the file keeps what it expects: an extra file of the ``.pt2``, a metadata key of the ONNX model.
SIDECAR = "trajrl.json"
ONNX_METADATA = "trajrl"


class FlatAction(nn.Module):
    """An action -> gymnasium's flat form of it, as ``trajrl.envs.gym_envs.ExtraInputs`` observes
    it: one-hot codes (``Discrete``, each part of a ``MultiDiscrete``), bits, or numbers within
    the space's bounds."""

    def __init__(self, space):
        super().__init__()
        import gymnasium as gym

        self.codes: list[int] = []
        self.bits = isinstance(space, gym.spaces.MultiBinary)
        if isinstance(space, gym.spaces.Discrete):
            self.codes = [int(space.n)]
        elif isinstance(space, gym.spaces.MultiDiscrete):
            self.codes = [int(n) for n in space.nvec]
        flat = gym.spaces.flatten_space(space)
        self.register_buffer("low", torch.as_tensor(flat.low, dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(flat.high, dtype=torch.float32))
        self.size = int(flat.shape[0])

    def forward(self, action: torch.Tensor) -> torch.Tensor:
        if len(self.codes) == 1:
            return nn.functional.one_hot(action, self.codes[0]).float()
        if self.codes:
            return torch.cat([nn.functional.one_hot(action[:, i], n).float() for i, n in enumerate(self.codes)], -1)
        if self.bits:
            return action.float()
        return torch.minimum(torch.maximum(action, self.low), self.high)


class GreedyStep(nn.Module):
    """One step of a greedy recurrent agent in plain torch (the module docstring's function):
    the encoder (the inputs' standardisation inside), the memory core one step from the state
    (zeros at an episode's start), ``choose`` the greedy action, and the state after the step
    with the action's flat form where the run observed it (``flat_action``) and the steps since the
    episode began where it observed its time (``time_scales``: ``tanh(steps / s)`` for each)."""

    def __init__(
        self,
        encoder: nn.Module,
        core: nn.Module | None,
        choose: nn.Module,
        flat_action: FlatAction | None = None,
        reward_scale: float | None = None,
        time_scales: tuple[float, ...] = (),
    ):
        super().__init__()
        from trajrl.algos.memory import state_keys, state_shape

        self.encoder, self.core, self.choose, self.flat_action = encoder, core, choose, flat_action
        self.reward_scale = reward_scale  # None: the run did not observe its previous reward
        self.core_shapes = [state_shape(core)] * len(state_keys(core)) if core is not None else []
        self.sizes = [layers * size for layers, size in self.core_shapes]
        if flat_action is not None:
            self.sizes.append(flat_action.size)
        # None: the run did not observe its episode's time
        self.register_buffer("time_scales", torch.tensor(time_scales, dtype=torch.float32) if time_scales else None)
        if time_scales:
            self.sizes.append(1)  # the steps since the episode began
        self.state_size = sum(self.sizes)

    def forward(
        self,
        observation: torch.Tensor,
        state: torch.Tensor,
        episode_start: torch.Tensor,
        reward: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from trajrl.algos.memory import run_memory

        batch = observation.shape[0]
        start = episode_start.reshape(-1, 1)
        state = torch.where(start, torch.zeros_like(state), state)
        parts = list(state.split(self.sizes, -1)) if self.sizes else []
        inputs = [observation]
        steps = parts.pop() if self.time_scales is not None else None
        if steps is not None:
            inputs.append(torch.tanh(steps / self.time_scales))
        if self.flat_action is not None:
            inputs.append(parts[-1])
        if self.reward_scale is not None:
            inputs.append(torch.where(start, 0.0, reward.reshape(-1, 1) * self.reward_scale))
        features = self.encoder(torch.cat(inputs, -1) if len(inputs) > 1 else observation)
        after = []
        if self.core is not None:
            shapes = self.core_shapes
            held = tuple(p.reshape(batch, *shape).transpose(0, 1) for p, shape in zip(parts, shapes))
            out, final = run_memory(self.core, features.unsqueeze(1), held)
            features = out[:, 0]
            after = [f.transpose(0, 1).reshape(batch, -1) for f in final]
        action = self.choose(features)
        if self.flat_action is not None:
            after.append(self.flat_action(action))
        if steps is not None:
            after.append(steps + 1)
        return action, (torch.cat(after, -1) if after else state)


def greedy_step(cfg, agent) -> GreedyStep:
    """The greedy agent of a loaded run (``trajrl.report.evaluate_run.load_run``) as a ``GreedyStep``."""
    from trajrl.envs.gym_envs import gym_options

    net = agent.greedy_net
    if not hasattr(net, "greedy_parts"):
        raise TypeError(f"no greedy step for a {type(net).__name__}: it has no greedy_parts()")
    encoder, core, choose = net.greedy_parts()
    options = gym_options(cfg.env)
    flat_action = FlatAction(raw_spaces(cfg.env)[1]) if options["previous_action"] else None
    reward_scale = options["reward_scale"] if options["previous_reward"] else None
    return GreedyStep(encoder, core, choose, flat_action, reward_scale, options["time_scales"]).eval()


#: The spaces of each environment config this process has asked for (``raw_spaces``).
_SPACES: dict[str, tuple] = {}


def raw_spaces(env_cfg) -> tuple:
    """``(observation space, action space)`` of the run's environment as gymnasium makes it, with
    the kwargs training passes it (made once a process for each environment config)."""
    from omegaconf import OmegaConf

    key = OmegaConf.to_yaml(env_cfg)
    if key not in _SPACES:
        import gymnasium as gym

        from trajrl.envs.gym_envs import import_env_module

        import_env_module(env_cfg.get("import_module"))
        env = gym.make(str(env_cfg.id), **dict(env_cfg.kwargs or {}))
        try:
            _SPACES[key] = env.observation_space, env.action_space
        finally:
            env.close()
    return _SPACES[key]


def describe(cfg, step: GreedyStep, which: str, fmt: str) -> dict:
    """What the file expects and gives (``SIDECAR``)."""
    from importlib.metadata import version

    import gymnasium as gym

    from trajrl.envs.gym_envs import gym_options, registering_module

    observations, actions = raw_spaces(cfg.env)
    options = gym_options(cfg.env)
    inputs = ["observation", "state", "episode_start"] + (["reward"] if options["previous_reward"] else [])
    return {
        "trajrl": version("trajrl"),
        "format": fmt,
        "algo": str(cfg.algo.name),
        "agent": which,
        "env_id": str(cfg.env.id),
        "env_kwargs": dict(cfg.env.kwargs or {}),
        "env_import_module": registering_module(str(cfg.env.id), cfg.env.get("import_module")),
        "observation_space": str(observations),
        "observation_size": int(gym.spaces.flatdim(observations)),
        "action_space": str(actions),
        "state_size": step.state_size,
        "initial_state": f"zeros [B, {step.state_size}] float32",
        "inputs": inputs,
        "outputs": ["action", "next_state"],
        "previous_action": options["previous_action"],
        "previous_reward": options["previous_reward"],
        "time_scales": list(options["time_scales"]),  # [] where the run did not observe its episode's time
    }


def example_inputs(step: GreedyStep, observation_size: int, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Inputs of ``batch`` environments for tracing ``step``."""
    inputs = (
        torch.zeros(batch, observation_size),
        torch.zeros(batch, step.state_size),
        torch.tensor([True] + [False] * (batch - 1)),
    )
    return inputs + ((torch.zeros(batch),) if step.reward_scale is not None else ())


def export_agent(
    run_dir: str | Path,
    which: str = "best",
    fmt: str = "onnx",
    out: str | Path | None = None,
    check_episodes: int = 10,
) -> tuple[Path, dict]:
    """Write the greedy agent of ``run_dir``'s ``which`` checkpoint as one ``fmt`` file (``FORMATS``)
    at ``out`` (default: ``<run dir>/agent-<which><suffix>``), then play ``check_episodes`` episodes
    (seeds 0, 1, ...) with trajrl's greedy policy and with the file, in its runtime, along the same
    episodes: ``(path, {"episodes", "steps", "return", "max_difference"})``; ``ExportMismatch`` where
    an action differs (discrete: at all; continuous: by more than 1e-5)."""
    from trajrl.report.evaluate_run import load_run

    if fmt not in FORMATS:
        raise ConfigError("--format", fmt, f"is not a format trajrl exports to: use one of {', '.join(FORMATS)}")
    needs = ("onnx", "onnxscript", "onnxruntime") if fmt == "onnx" else ()
    missing = [name for name in needs if not _importable(name)]
    if missing:
        raise ConfigError("--format", fmt, f"needs {', '.join(missing)}, not installed: pip install 'trajrl[export]'")
    path = Path(out) if out is not None else Path(run_dir) / f"agent-{which}{FORMATS[fmt]}"
    if path.suffix != FORMATS[fmt]:
        suffix = FORMATS[fmt]
        raise ConfigError("--out", str(path), f"--format {fmt} writes a {suffix} file: name it <name>{suffix}")
    cfg, agent = load_run(run_dir, which)
    step = greedy_step(cfg, agent)
    sidecar = describe(cfg, step, which, fmt)
    example = example_inputs(step, sidecar["observation_size"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with quiet_exporters():
        program = exported_program(step, example)
        with replaced_whole(path, keep_suffix=True) as partial:  # interrupted or failed: no half file at path
            if fmt == "torch":
                torch.export.save(program, partial, extra_files={SIDECAR: json.dumps(sidecar)})
            else:
                write_onnx(program, example, sidecar, partial)
    return path, check_exported(cfg, agent, path, check_episodes)


def exported_program(step: GreedyStep, example: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    """``step`` traced by ``torch.export`` for any number of environments (the batch dimension free)."""
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    with torch.no_grad():
        return torch.export.export(step, example, dynamic_shapes=tuple({0: batch} for _ in example))


def check_exported(cfg, agent, path: Path, episodes: int) -> dict:
    """trajrl's greedy policy over ``episodes`` episodes (seeds 0, 1, ...), and the file at ``path``
    answering the same observations: the steps compared, the mean return, the largest difference."""
    import numpy as np

    if episodes == 0:
        return {"episodes": 0}
    seeds = list(range(episodes))
    ours, returns = play_trajrl(cfg, agent, seeds)
    theirs, _ = play_exported(Exported(path), seeds, steer=ours)
    differ = same_actions(theirs, ours)
    if differ is not None:
        raise ExportMismatch(f"{path} does not act as trajrl's greedy agent: {differ} (a trajrl bug: please report it)")
    largest = max(float(np.abs(a.astype(np.float64) - b).max()) for a, b in zip(theirs, ours))
    return {
        "episodes": episodes,
        "steps": sum(len(a) for a in ours),
        "return": float(np.mean(returns)),
        "max_difference": largest,
    }


class ExportMismatch(RuntimeError):
    """The exported file acts otherwise than trajrl's greedy policy on the same observations."""


def write_onnx(program, example: tuple, sidecar: dict, path: Path) -> None:
    """An exported ``program`` (``torch.export``) as an ONNX model at ``path`` (torch's dynamo
    exporter), ``sidecar`` in its metadata."""
    import onnx

    program = torch.onnx.export(
        program,
        example,
        input_names=sidecar["inputs"],
        output_names=sidecar["outputs"],
        dynamo=True,
        verbose=False,
    )
    model = program.model_proto
    entry = model.metadata_props.add()
    entry.key, entry.value = ONNX_METADATA, json.dumps(sidecar)
    onnx.save(model, str(path))


class Exported:
    """An exported file as its runtime runs it (onnxruntime for ``.onnx``, in one thread as trajrl
    plays an agent; torch for ``.pt2``): ``agent(observation, state, episode_start[, reward])`` on
    numpy arrays, ``agent.spec`` its sidecar, ``agent.initial_state(batch)`` the state to start from."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if path.suffix == FORMATS["onnx"]:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1  # one step at a time
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            self.spec = json.loads(self.session.get_modelmeta().custom_metadata_map[ONNX_METADATA])
            self.program = None
        else:
            extra = {SIDECAR: ""}
            self.program = torch.export.load(str(path), extra_files=extra).module()
            self.spec = json.loads(extra[SIDECAR])

    @classmethod
    def of(cls, module: nn.Module, spec: dict) -> Exported:
        """A module (a ``GreedyStep``, an exported program's) played as the file would be."""
        agent = cls.__new__(cls)
        agent.program, agent.spec = module, spec
        return agent

    def initial_state(self, batch: int):
        import numpy as np

        return np.zeros((batch, self.spec["state_size"]), np.float32)

    def __call__(self, *inputs):
        observation = inputs[0]
        size = self.spec["observation_size"]
        if observation.ndim != 2 or observation.shape[1] != size:
            raise ValueError(
                f"observation of shape {tuple(observation.shape)}: the agent takes [B, {size}] float32, "
                f"gymnasium.spaces.flatten({self.spec['observation_space']}, obs) for each of B environments"
            )
        if self.program is None:
            return self.session.run(None, dict(zip(self.spec["inputs"], inputs)))
        with torch.no_grad():
            return [out.numpy() for out in self.program(*(torch.as_tensor(x) for x in inputs))]


def play_exported(agent: Exported, seeds: list[int], steer: list | None = None) -> tuple[list, list[float]]:
    """``agent`` over one episode per seed of its environment (``gym.make`` as the sidecar names it,
    ``reset(seed=...)``), as a deployment runs it: each episode's actions, and its return. With
    ``steer`` (each episode's actions, another player's), the environment takes those instead and
    ``agent`` answers the observations they lead to: its actions along the other's episodes."""
    import gymnasium as gym
    import numpy as np

    from trajrl.envs.gym_envs import import_env_module

    spec = agent.spec
    import_env_module(spec.get("env_import_module"))
    env = gym.make(spec["env_id"], **spec["env_kwargs"])
    episodes, returns = [], []
    try:
        for episode, seed in enumerate(seeds):
            obs, _ = env.reset(seed=seed)
            state, start, reward, actions, total, done = agent.initial_state(1), np.ones(1, bool), 0.0, [], 0.0, False
            while not done:
                inputs = [gym.spaces.flatten(env.observation_space, obs).astype(np.float32)[None], state, start]
                inputs += [np.array([reward], np.float32)] if spec["previous_reward"] else []
                action, state = agent(*inputs)
                actions.append(action[0])
                taken = action[0] if steer is None else steer[episode][len(actions) - 1]
                obs, reward, terminated, truncated, _ = env.step(taken)
                start[:] = False
                total += float(reward)
                done = terminated or truncated
            episodes.append(np.stack(actions))
            returns.append(total)
    finally:
        env.close()
    return episodes, returns


def play_trajrl(cfg, agent, seeds: list[int]) -> tuple[list, list[float]]:
    """trajrl's own greedy policy (``agent.greedy_policy``, as ``trajrl evaluate`` acts) over one episode per
    seed of the run's environment with trajrl's wrappers (``reset(seed=...)``): each episode's
    actions, and its return (in the environment's own rewards)."""
    import numpy as np
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from trajrl.envs.gym_envs import gym_options, make_gym

    options = gym_options(cfg.env)
    env = make_gym(str(cfg.env.id), dict(cfg.env.kwargs or {}), cfg.env.get("import_module"), **options)
    shapes = agent.state_shapes()
    episodes, returns = [], []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            state = {key: torch.zeros(1, *shape) for key, shape in shapes.items()}
            start, actions, total, done = True, [], 0.0, False
            while not done:
                step = TensorDict(
                    {"observation": torch.as_tensor(obs)[None], "is_init": torch.tensor([[start]]), **state}, [1]
                )
                with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
                    step = agent.greedy_policy(step)
                action = step.get("action")[0].numpy()
                state = {key: step.get(("next", key)) for key in shapes}
                actions.append(action)
                obs, reward, terminated, truncated, _ = env.step(action)
                start, total, done = False, total + float(reward) / options["reward_scale"], terminated or truncated
            episodes.append(np.stack(actions))
            returns.append(total)
    finally:
        env.close()
    return episodes, returns


def same_actions(ours: list, theirs: list, atol: float = 1e-5) -> str | None:
    """None where two plays of the same seeds took the same actions at every step (within ``atol``
    for continuous ones), else where they first differ."""
    import numpy as np

    for episode, (a, b) in enumerate(zip(ours, theirs)):
        steps = min(len(a), len(b))
        close = np.isclose(a[:steps].astype(np.float64), b[:steps].astype(np.float64), rtol=0, atol=atol)
        differ = np.flatnonzero(~close.reshape(steps, -1).all(-1))
        if len(differ):
            t = int(differ[0])
            return f"episode {episode}, step {t}: {a[t].tolist()} against {b[t].tolist()}"
        if len(a) != len(b):
            return f"episode {episode}: {len(a)} steps against {len(b)}"
    return None


@contextlib.contextmanager
def quiet_exporters():
    """torch's exporters without their notes to developers (deprecations, optional packages absent,
    an LSTM's weights traced as constants: what acting reads), which a user can do nothing about."""
    import logging
    import warnings

    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
