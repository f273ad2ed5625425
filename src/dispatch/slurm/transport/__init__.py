"""Transports: the one seam between the adapter and a cluster (``run(script, timeout) -> Result``)."""

from dispatch.slurm.transport.base import (
    Executor,
    Result,
    TransportFailure,
    make_transport,
    register_transport,
    transports,
)

__all__ = ["Executor", "Result", "TransportFailure", "make_transport", "register_transport", "transports"]
