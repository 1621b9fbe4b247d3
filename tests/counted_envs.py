"""CartPole that counts what the collectors step of it, for checking a run's frame accounting
against what really happened (``env=gym env.id=Counted-v0 env.import_module=counted_envs
+env.kwargs.count_dir=<dir>``).

Each process whose collector steps it takes a number ``k`` (1, 2, ... in the order they first
step) and writes, in ``count_dir``: ``<k>.steps``, one byte per step it took (the step that
raised included: the run counts it as a frame of the episode it ends), ``<k>.faults``, with
``+env.kwargs.every=n`` (every n-th step of the process raises, as ``bad_envs.Flaky``), a line
per step that raised with the frames of the episode it cut, and ``<k>.pid``. Each stored step
says which process stepped it: its reward is ``1 + k / 1024`` (exact in float32). Steps in
the learner's main thread (measuring observations, probing the clock, evaluating, checking
the environment) are not counted, never raise, and earn 1."""

import multiprocessing
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

_processes: dict[tuple[str, int], dict] = {}  # (count_dir, pid) -> this process's number, step count, files


def in_a_collector() -> bool:
    """A collector's step: in a worker or environment process, or in the sync collector's thread."""
    return multiprocessing.parent_process() is not None or threading.current_thread() is not threading.main_thread()


def this_process(count_dir: str) -> dict:
    """This process's number and files in ``count_dir``, taken at its first counted step."""
    key = (count_dir, os.getpid())
    if key not in _processes:
        k = 1
        while True:
            try:
                steps = os.open(f"{count_dir}/{k}.steps", os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND)
                break
            except FileExistsError:
                k += 1
        Path(f"{count_dir}/{k}.pid").write_text(str(os.getpid()))
        _processes[key] = {"k": k, "steps": steps, "taken": 0}
    return _processes[key]


class Counted(CartPoleEnv):
    """CartPole counting the steps collectors take (see the module); ``width``: that many more
    numbers (zeros) observed, for writes into the buffer large enough to take a while."""

    def __init__(self, count_dir=None, every=0, width=0, **kwargs):
        super().__init__(**kwargs)
        self.count_dir, self.every, self.width, self.episode_frames = count_dir, every, width, 0
        if width:
            high = np.concatenate([self.observation_space.high, np.ones(width, np.float32)])
            self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def _wide(self, observation):
        return np.concatenate([observation, np.zeros(self.width, np.float32)]) if self.width else observation

    def reset(self, **kwargs):
        self.episode_frames = 0
        observation, info = super().reset(**kwargs)
        return self._wide(observation), info

    def step(self, action):
        if self.count_dir is None or not in_a_collector():
            observation, *rest = super().step(action)
            return (self._wide(observation), *rest)
        process = this_process(str(self.count_dir))
        os.write(process["steps"], b".")  # unbuffered: a process SIGKILLed after it has counted every step
        process["taken"] += 1
        self.episode_frames += 1
        if self.every and process["taken"] % self.every == 0:
            with open(f"{self.count_dir}/{process['k']}.faults", "a") as faults:
                print(self.episode_frames, file=faults)
            raise RuntimeError(f"flaky: step {process['taken']} of process {os.getpid()}")
        observation, _, terminated, truncated, info = super().step(action)
        return self._wide(observation), 1.0 + process["k"] / 1024, terminated, truncated, info


gym.register("Counted-v0", entry_point=Counted, max_episode_steps=500)


def counted(count_dir: Path, *kwargs: str) -> list[str]:
    """The overrides of a run on ``Counted-v0`` counting into ``count_dir`` (made here), with ``kwargs``
    (``"every=150"``) for the environment."""
    count_dir.mkdir(parents=True, exist_ok=True)
    return [
        "env=gym",
        "env.id=Counted-v0",
        "env.import_module=counted_envs",
        f"+env.kwargs.count_dir={count_dir}",
        *(f"+env.kwargs.{kwarg}" for kwarg in kwargs),
    ]


def flaky(count_dir: Path, every: int) -> list[str]:
    """The default run on ``Counted-v0`` whose collectors' every ``every``-th step of a process raises
    (each process's steps and each fault's cut episode counted in ``count_dir``).
    Only the collectors' steps count and raise: measuring observations, probing the clock and
    evaluating (the defaults, on) step it in the learner's main thread."""
    return [
        *counted(count_dir, f"every={every}"),
        "storage.capacity=4000",  # never wraps: the checkpoint holds every step stored
        "audit=true",
        "audit_every=1",
    ]


@dataclass
class Stepped:
    """What one collector process stepped: its frames, and the frames of each episode a fault cut."""

    pid: int
    frames: int
    fault_episodes: list[int] = field(default_factory=list)


def stepped(count_dir) -> dict[int, Stepped]:
    """``{k: Stepped}`` of every process that stepped ``Counted-v0`` into ``count_dir``."""
    found = {}
    for steps in Path(count_dir).glob("*.steps"):
        k = int(steps.stem)
        faults = steps.with_suffix(".faults")
        episodes = [int(line) for line in faults.read_text().split()] if faults.exists() else []
        found[k] = Stepped(int(steps.with_suffix(".pid").read_text()), steps.stat().st_size, episodes)
    return found


def stored_by(rewards) -> dict[int, int]:
    """``{k: stored steps}`` from the rewards a buffer's storage holds (a fault's own step, reward 0,
    and what was never written: none)."""
    counts = {}
    for reward, count in zip(*rewards.reshape(-1).unique(return_counts=True)):
        k = (float(reward) - 1) * 1024
        if 1 <= k < 1024 and k == int(k):
            counts[int(k)] = int(count)
    return counts


def assert_the_frames_add_up(run_dir, count_dir, retired=(), faults_stored=False, lanes=False) -> dict:
    """The run's last metrics row against what really happened: the frames its environments
    stepped (their own counts), what its buffer holds (the final checkpoint's count of steps
    written; where faults or a killed worker lost some, what each process stored, read from its
    storage, which must not have wrapped), the frames lost (the episodes faults cut, unless
    ``faults_stored``: fixed frames store them; and what the processes of the collectors replaced
    after a worker died, ``retired``, stepped and never stored), and so the frames still in
    flight at the end. Each retired process may have counted a step here that it never handed
    back (killed, or ended by the collector that saw a worker die, between its environment's
    step and the run's count of it): a frame the run cannot see. ``lanes`` (fixed frames): a lane's steps are
    in the storage before its write is counted, so the storage may also hold the steps of a write under way when
    the run ended (the processes that stepped them still running: not ``retired``). Returns those figures."""
    from helpers import rows_of

    from trajrl.checkpoint import load_checkpoint

    last = rows_of(run_dir)[-1]
    saved = load_checkpoint(run_dir)
    storage = saved["buffer"]["_storage"]
    processes = stepped(count_dir)
    frames = sum(p.frames for p in processes.values())
    unseen = frames - last["collect/frames_stepped"]
    assert 0 <= unseen <= len(retired), f"the environments stepped {frames} frames; the run says {last}"
    tagged = stored_by(storage["_storage"]["next.reward"][: storage["_len"]])  # lanes: their unwritten rows too
    faults = sum(len(p.fault_episodes) for p in processes.values())
    cut = {k: 0 if faults_stored else sum(p.fault_episodes) for k, p in processes.items()}
    written = saved["buffer"]["_writer"]["_write_count"]
    if retired or faults:  # what each process stored is read from the storage: every step written is held
        # (nothing overwritten) and was stepped by a counted process; with faults_stored, a fault's own
        # step (reward 0) is held too, unless its episode was still in flight
        held = sum(tagged.values())
        if lanes:
            assert written <= held, (written, tagged)
        else:
            assert held <= written <= held + faults if faults_stored else held == written, (written, tagged, faults)
    figures = {  # less the steps retired processes took and never handed back
        "stepped": sum(p.frames for p in processes.values()) - unseen,
        "stored": written,
        "lost": sum(cut.values()) + sum(processes[k].frames - tagged.get(k, 0) - cut[k] for k in retired) - unseen,
    }
    figures["in_flight"] = figures["stepped"] - figures["stored"] - figures["lost"]
    reported = {
        "stepped": last["collect/frames_stepped"],
        "stored": last["frames"],
        "lost": last["collect/frames_lost_to_faults"],
        "in_flight": last["buffer/frames_in_flight_dropped"],
    }
    assert reported == figures, f"the run's accounting {reported}; what happened {figures}"
    assert saved["frames"] == figures["stored"], (saved["frames"], figures)
    return figures
