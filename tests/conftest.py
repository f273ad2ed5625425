"""Settings for every test: Hypothesis judges properties, never speed (no per-example deadline: on a machine
loaded by other work an example can take seconds, and a deadline would make the property flaky)."""

import pwd
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.peer import peer_account

settings.register_profile("dispatch", deadline=None)
settings.load_profile("dispatch")


@pytest.fixture
def peer() -> Iterator[pwd.struct_passwd]:
    """A second Unix account of the machine, held for the test (:func:`tests.peer.peer_account`)."""
    with peer_account() as account:
        yield account
