"""A memory core and a sampler added from one module of a user's, as a project that extends trajrl in both
ways would: ``env.import_module=toy_parts`` registers ``algo.rnn=decaying_sum`` (``toy_core``) and
``sampler=torchrl_slices`` (``toy_sampler``)."""

import toy_core  # noqa: F401
import toy_sampler  # noqa: F401
