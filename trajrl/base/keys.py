"""The names of the entries trajrl adds to TorchRL's tensordicts, in one leaf module that
the collectors, the replay buffers and the learners all read (it imports nothing)."""

#: Each step's trajectory id, as TorchRL's collectors write it.
TRAJ_KEY = ("collector", "traj_ids")
#: True where a padded batch holds a real step (``trajrl.replay.incoming``, ``as_sequences``).
MASK_KEY = ("collector", "mask")
#: The weight version a step was collected with.
VERSION_KEY = "policy_version"
#: The collector slot of the worker whose environment took a step (``trajrl.collect.collector_env``).
WORKER_KEY = "worker"
#: A step that an environment's fault ended (``trajrl.collect.faults``).
FAULT_KEY = "env_fault"
#: Where a learner writes each step's |TD error| (NaN where it did not learn) for priorities.
TD_KEY = "td_error"
#: Where the acting policy stores log pi(a|s).
LOG_PROB_KEY = "action_log_prob"
#: Continuous actions: the Gaussian sample, before clipping to the bounds.
SAMPLE_KEY = "action_sample"
#: Per sampled step (hindsight): the substituted goal, whether the step's slice is
#: relabelled, and (``her_state=recompute``) the slice's initial recurrent state under that goal.
GOAL_KEY, RELABELLED_KEY, STATE_KEY = ("hindsight", "goal"), ("hindsight", "relabelled"), ("hindsight",)
#: On a tape (``trajrl.replay.tapes``): the cell after an episode's last step, holding the
#: observation that followed it (not a step: nothing is learnt there).
CLOSING_KEY = ("collector", "closing")
