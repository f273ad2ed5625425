"""A tiny "training" job: every rank reports who it is, then they all finish.

Run it on the embedded default (the local adapter):  dispatch run --nodes 2 -- python3 examples/hello_ranks.py
It reads the rank environment every adapter sets (docs/concepts.md) and stops with a clear error (exit status 1)
when started outside dispatch (or torchrun), rather than pretend to be rank 0 of 1.
"""

import os
import socket
import sys
import time

missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
if missing:
    sys.exit(f"hello_ranks: {', '.join(missing)} not set: start it with dispatch run (or torchrun)")
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
execution = os.environ.get("DISPATCH_EXECUTION", "?")
rendezvous = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
for step in range(3):
    print(f"rank {rank}/{world} on {socket.gethostname()} execution {execution}: step {step}", flush=True)
    time.sleep(0.2)
print(f"rank {rank}: done (rendezvous {rendezvous})", flush=True)
