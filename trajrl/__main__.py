"""The CLI: ``python -m trajrl [overrides]`` (also the ``trajrl`` console script)."""
from __future__ import annotations

import logging
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from trajrl.config import CONFIG_DIR, ConfigError
from trajrl.factory.collector import CollectorFailed

log = logging.getLogger("trajrl")


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    """Train with the composed config; return the final evaluation return (for sweepers)."""
    from trajrl.train import summary, train

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        final = train(cfg, run_dir=run_dir, echo=lambda line: print(line, flush=True))
    except (ConfigError, CollectorFailed) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        kind = "configuration error" if isinstance(err, ConfigError) else "run failed"
        print(f"trajrl: {kind}: {err}" + ("" if isinstance(err, ConfigError) else
              f" (run directory {run_dir}; HYDRA_FULL_ERROR=1 shows the traceback)"), file=sys.stderr)
        sys.exit(2 if isinstance(err, ConfigError) else 1)
    print(summary(final), flush=True)
    return final.get("eval/return", float("nan"))


def main() -> None:
    run()


if __name__ == "__main__":
    main()
