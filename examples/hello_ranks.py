"""A tiny "training" job: every rank reports who it is, then they all finish.

Run it on the embedded default (the local adapter):  dispatch run --nodes 2 -- python3 examples/hello_ranks.py
"""

import os
import socket
import time

rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
execution = os.environ.get("DISPATCH_EXECUTION", "?")
for step in range(3):
    print(f"rank {rank}/{world} on {socket.gethostname()} execution {execution}: step {step}", flush=True)
    time.sleep(0.2)
print(f"rank {rank}: done", flush=True)
