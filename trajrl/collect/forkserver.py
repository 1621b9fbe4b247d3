"""A fork server started as a new interpreter: set up once in the server, before it forks any collector worker.

``python -m trajrl`` starts its collector workers with multiprocessing's ``forkserver``
method (``trajrl.base.processes.workers_from_a_fork_server``). Its server is a fork of the
learner's process (``start_fork_server``), which has imported what the workers run; where it
is a new interpreter instead (the learner already runs threads, or a program of the user's set
the same start method), it imports ``trajrl.factory`` (everything a worker unpickles: torch,
TorchRL, gymnasium, trajrl's environments, policies and buffers) and this module once, then
forks each worker from itself, so that a worker starts with its imports done instead of making
them anew (``spawn`` repeats the learner's own imports of torch, TorchRL and gymnasium in every
worker)."""

from trajrl.base.signals import stacks_on_sigusr1

# ``kill -USR1`` to the run's process group prints stacks; without a handler the server would die of it.
stacks_on_sigusr1()
