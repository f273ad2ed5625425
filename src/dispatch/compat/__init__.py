"""Code written for another library, run on dispatch with one changed import.

* :mod:`dispatch.compat.submitit`: ``from dispatch.compat import submitit`` in place of ``import submitit``
  (docs/coming-from-submitit.md).

Nothing here is in ``dispatch.__all__``: a compatibility layer is a door in, not dispatch's own API.
"""
