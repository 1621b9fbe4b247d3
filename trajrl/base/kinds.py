"""The names of the kinds trajrl tells apart, in a leaf module (it imports nothing) that the
configuration, the environments, the replay and the algorithms all read."""

#: Kinds of actions (``trajrl.envs.spaces.action_kind`` reads them from a gymnasium space; an algorithm
#: lists those it takes: ``trajrl.algos.registry.AlgoSpec.actions``).
DISCRETE, CONTINUOUS, MULTI_DISCRETE, MULTI_BINARY = "discrete", "continuous", "multi_discrete", "multi_binary"

#: Hindsight Experience Replay: where a substituted goal comes from (``trajrl.replay.hindsight``).
HER_STRATEGIES = ("future", "final", "episode")
