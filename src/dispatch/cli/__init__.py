"""The ``dispatch`` command line. Entry point: :func:`dispatch.cli.main.main`; see ``docs/cli.md``."""
