"""The ``dispatch-admission`` console script: run the AdmissionCheck controller until interrupted."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading

from dispatch.admission.controller import Controller, ControllerSettings


def parse(argv: list[str] | None = None) -> ControllerSettings:
    p = argparse.ArgumentParser(prog="dispatch-admission", description=__doc__)
    p.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: current-context)")
    p.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    p.add_argument("--controller-name", default="dispatch.io/admission", help="the AdmissionChecks' controllerName")
    p.add_argument("--lease-name", default="dispatch-admission")
    p.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "kube-system"))
    p.add_argument("--identity", default=os.environ.get("POD_NAME") or socket.gethostname())
    p.add_argument("--lease-duration", type=float, default=15.0, help="seconds")
    p.add_argument("--renew-every", type=float, default=5.0, help="seconds")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    if a.in_cluster and (a.kubeconfig or a.context):
        p.error("--in-cluster excludes --kubeconfig and --context")
    if a.renew_every <= 0 or a.lease_duration <= a.renew_every:
        p.error("--lease-duration must be longer than --renew-every, both positive")
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return ControllerSettings(
        kubeconfig=a.kubeconfig,
        context=a.context,
        in_cluster=a.in_cluster,
        controller_name=a.controller_name,
        lease_name=a.lease_name,
        lease_namespace=a.lease_namespace,
        identity=a.identity,
        lease_duration=a.lease_duration,
        renew_every=a.renew_every,
    )


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    controller = Controller(settings)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    controller.start()
    done.wait()
    controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
