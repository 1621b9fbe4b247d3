"""A file a user keeps (a checkpoint, an exported agent) is replaced whole or not at all
(``trajrl.base.files.replaced_whole``): a write interrupted by Ctrl-C or cut short by a full disk
leaves the file before as it was, and no temporary file beside it."""

import errno
import signal

import pytest
import torch

from trajrl.base.errors import RunInterrupted
from trajrl.base.files import replaced_whole
from trajrl.checkpoint import save_checkpoint


@pytest.mark.parametrize(
    "stop", [RunInterrupted(signal.SIGINT), OSError(errno.ENOSPC, "No space left on device")], ids=["sigint", "full"]
)
@pytest.mark.parametrize("keep_suffix", [False, True], ids=["checkpoint", "export"])
def test_a_write_stopped_halfway_leaves_the_file_before_and_nothing_else(stop, keep_suffix, tmp_path):
    path = tmp_path / "agent-best.onnx"
    path.write_bytes(b"the agent before")
    with pytest.raises(type(stop)), replaced_whole(path, keep_suffix=keep_suffix) as partial:
        partial.write_bytes(b"half of the new ag")
        raise stop
    assert path.read_bytes() == b"the agent before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent-best.onnx"]


def test_a_whole_write_replaces_the_file(tmp_path):
    path = save_checkpoint(tmp_path / "latest.pt", {"frames": 1})
    save_checkpoint(path, {"frames": 2, "weights": torch.ones(3)})
    assert torch.load(path, weights_only=True)["frames"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]
