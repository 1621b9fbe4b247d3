"""What the CLI's fork server imports once: everything a collector worker unpickles
(torch, TorchRL, gymnasium, trajrl's environments, policies and buffers).

``python -m trajrl`` starts its collector workers with multiprocessing's ``forkserver``
method (``trajrl.__main__.workers_from_a_fork_server``): a server process imports this
module once, then forks each worker from itself, so that a worker starts with its
imports done instead of making them anew (``spawn`` repeats the learner's own imports
of torch, TorchRL and gymnasium in every worker)."""

import trajrl.factory  # noqa: F401  (imports every piece a worker runs)
from trajrl.training.interrupts import stacks_on_sigusr1

# ``kill -USR1`` to the run's process group prints stacks; without a handler the server would die of it.
stacks_on_sigusr1()
