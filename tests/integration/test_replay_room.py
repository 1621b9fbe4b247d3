"""The replay buffer's size as the config check estimates it before anything is built
(``trajrl.configuration.room``) against the bytes a real storage holds once a collector has
filled it: each term of the estimate (observations as float32 or as a uint8 image, each kind of
action, the recurrent state stored with every step, the bookkeeping) under a layout that has it."""

import pytest
from helpers import collect_frames

import trajrl
from trajrl.configuration.compose import validate
from trajrl.configuration.room import frame_bytes
from trajrl.envs.gym_envs import env_spaces

SPACES = ("env=gym", "env.import_module=space_envs", "env.id=Spaces-v0")


@pytest.mark.parametrize(
    "overrides",
    [
        ("storage=lazy_memmap",),  # the default agent on its task, its state kept apart
        (*SPACES, "+env.kwargs.kind=image", "algo=r2d2", "sampler.state_every=null"),  # uint8, an LSTM's state
        (
            *SPACES,
            "+env.kwargs.kind=dict",
            "+env.kwargs.actions=continuous",
            "algo.rnn=gru",
            "sampler.state_every=null",
        ),
        (*SPACES, "algo.rnn=lru", "sampler.state_every=null"),
        (*SPACES, "+env.kwargs.kind=tuple", "algo.rnn=ffm", "sampler.state_every=null", "env.previous_action=true"),
    ],
    ids=["default", "image_lstm", "dict_continuous_gru", "box_lru", "tuple_ffm"],
)
def test_the_estimate_of_a_frame_is_what_the_filled_storage_holds_a_frame(overrides, tmp_path):
    cfg = validate(trajrl.compose(["debug=smoke", "collector=sync", "algo.normalize_observations=false", *overrides]))
    estimate = frame_bytes(cfg, env_spaces(cfg.env))
    with trajrl.build(cfg, run_dir=tmp_path) as pipe:
        collect_frames(pipe, 60)
        frame = pipe.buffer.storage[0:1]  # one stored step, every key the storage holds
    held = {key: value.element_size() * value.numel() for key, value in frame.items(True, True)}
    assert estimate.total == frame.bytes(), (estimate, held)
