"""Settings for every test: Hypothesis judges properties, never speed (no per-example deadline: on a machine
loaded by other work an example can take seconds, and a deadline would make the property flaky)."""

from hypothesis import settings

from tests.peer import peer  # noqa: F401  (the fixture, for every test directory)

settings.register_profile("dispatch", deadline=None)
settings.load_profile("dispatch")
