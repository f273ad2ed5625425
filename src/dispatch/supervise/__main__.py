"""``python -m dispatch.supervise``: the same command as ``dispatch supervise``, with the same options.

::

    python -m dispatch.supervise --adapter slurm --settings '{"transport": "local"}' \\
        --records postgresql://dispatch@db/dispatch --owner sup-a --poll 5 --lease-ttl 30 --rules rules.toml

See ``dispatch supervise --help`` and docs/supervisor.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from dispatch.cli.main import main as dispatch

    return dispatch(["supervise", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
