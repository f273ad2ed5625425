"""A Hydra application whose sweeps run as dispatch jobs (docs/hydra.md):

    python examples/hydra_sweep/train.py -m lr=1e-3,1e-4,1e-5 hydra/launcher=dispatch

The task function is what each job runs, on the cluster: it reads its place in the dispatch job and returns a
value, which comes back to the launcher in Hydra's ``JobReturn``.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from dispatch import job


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def train(cfg: DictConfig) -> float:
    if cfg.fail_above is not None and cfg.lr > cfg.fail_above:
        raise ValueError(f"lr {cfg.lr} diverges")
    if cfg.flaky and job.context().submission == 1:
        raise RuntimeError("flaky: the first submission of each job fails")
    loss = 1.0
    for _ in range(cfg.steps):
        loss -= cfg.lr * loss
    run = job.run_id() if job.context().job else "(not a dispatch job)"
    print(f"lr={cfg.lr} loss={loss:.6f} run={run}")
    return round(loss, 6)


if __name__ == "__main__":
    train()
