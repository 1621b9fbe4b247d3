"""Trajectory layouts: finding stored episodes, sampling whole episodes, [B, T] sequences."""

from trajrl.replay.episodes import EpisodeSampler, as_sequences, find_episodes

__all__ = ["EpisodeSampler", "as_sequences", "find_episodes"]
