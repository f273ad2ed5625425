"""dispatch-admission: the Kueue AdmissionCheck controller behind the Kubeflow adapter's readmission gate.

See :mod:`dispatch.admission.controller` for what it does and docs/adapters/kubeflow.md for the protocol.
"""

from dispatch.admission.controller import Controller, ControllerSettings, decide

__all__ = ["Controller", "ControllerSettings", "decide"]
