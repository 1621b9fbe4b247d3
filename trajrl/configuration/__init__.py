"""Configuration: every setting declared (``settings``), composed by Hydra and checked once
(``compose``: ``compose()``, ``validate()``; ``checks``: one function per rule), ``--help``'s list
of settings (``helptext``), and the collector topologies the checks and the factory share
(``topology``). Nothing here imports torch: a config is checked in about a second."""
