"""`python -m nightly_fixture ARGS` is `accel-images ARGS` with the fixture's smoke stage (stubsmoke).

For the tests that run the nightly or a build in a process of its own (interrupts, leftovers); run with
tests/ on PYTHONPATH.
"""

import pytest

from accel_images.cli import main
from nightly_fixture import stubsmoke

with pytest.MonkeyPatch.context() as patch:
    stubsmoke.install(patch)
    main()
