"""Helpers that make training frameworks agree with dispatch inside a job (docs/lightning.md).

Each module imports its framework only when one of its functions is called, never at import: the frameworks are
no dependency of dispatch (install them beside it).
"""
