"""The dashboard: ``dispatch ui``, a local, read-only web view of the records (the ``ui`` extra).

Modules: :mod:`~dispatch.ui.scenarios` (records made by real runs, for tests, benchmark and screenshots).
"""
