"""Environments and their spaces: trajrl's own tasks registered with gymnasium (``gym_envs``;
the travel suite's, ``tasks``), every observation and action space as what the networks read
(``spaces``), and a user's environment checked against what it declares (``env_check``)."""
