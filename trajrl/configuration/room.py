"""What the replay buffer will take of the machine, known before anything is built: the bytes a
stored frame holds (every key a stored step keeps, as ``trajrl.factory.replay`` stores it) times
``storage.capacity``, against the room where the storage lives: memory (``MemAvailable``), and
``/dev/shm`` for a buffer shared with collector worker processes, or the free disk where a
memory-mapped storage writes its files. Nothing here imports torch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from trajrl.base.errors import ConfigError
from trajrl.base.kinds import DISCRETE
from trajrl.configuration.settings import PROCESS_COLLECTORS

#: Bytes of the keys every stored step holds besides its observations, action and recurrent state:
#: ``("next", "reward")`` and ``episode_reward`` (float32), ``step_count`` and ``("collector",
#: "traj_ids")`` (int64), ``policy_version`` (int32), ``is_init`` and the three done flags after the step (bool).
STEP_BOOKKEEPING = 4 + 4 + 8 + 8 + 4 + 1 + 3


@dataclass(frozen=True)
class FrameBytes:
    """What one stored frame takes: its observation (stored twice: before and after the step), its
    action, the recurrent state stored with it, and the bookkeeping every step holds."""

    observation: int
    action: int
    state: int
    bookkeeping: int = STEP_BOOKKEEPING

    @property
    def total(self) -> int:
        return 2 * self.observation + self.action + self.state + self.bookkeeping


def frame_bytes(cfg: DictConfig, spaces: Any) -> FrameBytes:
    """The bytes a frame of ``cfg``'s run takes in its replay buffer (``spaces``: ``env_spaces``')."""
    observation = spaces.observations * spaces.observation_itemsize
    # an index (int64), or float32 numbers: the actions of the algorithms that keep a buffer
    action = 8 if spaces.action_kind == DISCRETE else 4 * spaces.actions
    return FrameBytes(observation, action, 4 * state_numbers(cfg) if stores_every_state(cfg) else 0)


def stores_every_state(cfg: DictConfig) -> bool:
    """Whether the recurrent state is stored with every step (``sampler.state_every`` null, or auto
    where slices cannot start at kept states only), not apart at every k-th one."""
    from trajrl.configuration.checks import state_every_problem

    every = cfg.sampler.get("state_every")
    return every is None or (every == "auto" and state_every_problem(cfg) is not None)


def state_numbers(cfg: DictConfig) -> int:
    """Numbers of the acting policy's recurrent state (0: a policy without memory, or a memory core
    registered from outside trajrl, whose state is not known before it is built)."""
    algo = cfg.algo
    if not algo.get("recurrent", True):
        return 0
    hidden, size = int(algo.hidden_size), int(algo.get("memory_size", 0))
    return {
        "lstm": 2 * hidden,
        "gru": hidden,
        "lru": int(algo.get("memory_layers", 1)) * 2 * size,
        "ffm": 2 * size * int(algo.get("memory_context", 1)),
    }.get(str(algo.rnn), 0)


@dataclass(frozen=True)
class Room:
    """Bytes free where a storage lives, and what that place is, in words."""

    free: int
    where: str


def room_for(cfg: DictConfig) -> Room:
    """The least room of the places the run's storage fills: memory; ``/dev/shm`` for a buffer shared
    with worker processes; the disk of ``storage.scratch_dir`` (or of the run directory) for memory-mapped files."""
    if cfg.storage.kind == "lazy_memmap":
        path = Path(cfg.storage.get("scratch_dir") or run_dir_or_here())
        return Room(free_disk(path), f"free on the disk of {existing(path)} (storage.scratch_dir)")
    rooms = [Room(available_memory(), "of memory available (MemAvailable)")]
    if cfg.collector.kind in PROCESS_COLLECTORS and Path("/dev/shm").is_dir():
        rooms.append(Room(free_disk(Path("/dev/shm")), "free in /dev/shm (the buffer shared with worker processes)"))
    return min(rooms, key=lambda room: room.free)


def available_memory() -> int:
    """What the kernel says can be given to a new process without swapping (``MemAvailable``)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def free_disk(path: Path) -> int:
    """Bytes an unprivileged process may write on the filesystem of ``path`` (or of its nearest existing parent)."""
    stat = os.statvfs(existing(path))
    return stat.f_bavail * stat.f_frsize


def existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def run_dir_or_here() -> str:
    """The run directory Hydra chose (where ``<run dir>/buffer`` will be), or the working directory."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else os.getcwd()


def check_replay_room(cfg: DictConfig, spaces: Any) -> None:
    """The replay buffer fits where it will live: ``storage.capacity`` frames of ``frame_bytes``."""
    if cfg.storage.kind == "none":
        return
    capacity, frame = int(cfg.storage.capacity), frame_bytes(cfg, spaces)
    need, room = capacity * frame.total, room_for(cfg)
    if need <= room.free:
        return
    fits = room.free // frame.total
    raise ConfigError(
        "storage.capacity",
        capacity,
        f"the replay buffer would take {gigabytes(need)} ({capacity:,} frames of {frame.total:,} bytes: "
        f"observations {2 * frame.observation:,}, action {frame.action:,}, recurrent state {frame.state:,}, "
        f"bookkeeping {frame.bookkeeping}) and there is {gigabytes(room.free)} {room.where}; "
        f"use storage.capacity<={fits:,}"
        + (", or storage=lazy_memmap (on disk)" if cfg.storage.kind != "lazy_memmap" else ""),
    )


def gigabytes(size: int) -> str:
    return f"{size / 1e9:,.1f} GB" if size >= 1e8 else f"{size / 1e6:,.1f} MB"
