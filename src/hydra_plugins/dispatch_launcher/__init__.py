"""``hydra/launcher=dispatch``: a Hydra multirun sent to a dispatch cluster as one batched submission (docs/hydra.md).

* :mod:`~hydra_plugins.dispatch_launcher.config`: the launcher's structured config, registered in Hydra's
  ConfigStore as ``hydra/launcher: dispatch``;
* :mod:`~hydra_plugins.dispatch_launcher.launcher`: the launcher, which sends the sweep's jobs through
  :meth:`dispatch.Executor.submit_many` and turns each job's end into Hydra's ``JobReturn``;
* :mod:`~hydra_plugins.dispatch_launcher.remote`: what each job runs on the cluster (Hydra's ``run_job``).

Hydra imports every module of the ``hydra_plugins`` namespace whenever an application starts, so these import
Hydra only; dispatch is imported when a sweep is launched.
"""
