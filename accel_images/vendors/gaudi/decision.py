"""The compatibility rule the guard and `recommend` share: an image's Intel Gaudi software must equal the
host driver's, or on Gaudi 2 with host software from 1.17 on be behind it by a patch or one release
(host.py `fit`; guard.sh `admits` and `behind_host`, its message filled in by guard.py).

References:
- N-1 compatibility on Gaudi 2 from 1.17 (compat-facts §6.1, §8.19): "Added software backward/forward
  compatibility support for Gaudi 2, allowing users to run 1.16 dockers with Intel Gaudi software version
  1.17.0" (GAUDI_BACKWARD_DOCS); patch releases: `_behind`
"""

from __future__ import annotations

from accel_images.versions import compare_driver, parse

GAUDI_BACKWARD_DOCS = "https://docs.habana.ai/en/latest/Release_Notes/Release%20Notes%20v1.17.html"
N_MINUS_1_SINCE = "1.17"
OLDER_ON_GAUDI2 = "Gaudi 2 from 1.17 also runs older images of the host's minor release and the one before"


def _behind(image_sw: str, host_sw: str) -> str | None:
    """How far an image release older than the host's is behind it, where Gaudi 2's backward compatibility
    reaches: 'one release' for the previous minor, any patch ("allowing users to run 1.16 dockers with Intel
    Gaudi software version 1.17.0", GAUDI_BACKWARD_DOCS), 'a patch release' for an older patch of the host's
    own minor. The second is inferred: no Habana document speaks of patch releases, and an image must not be
    refused on a driver nearer to it than one that admits it. None otherwise, a newer image included."""
    try:
        image, host = parse(image_sw), parse(host_sw.split("-")[0])
    except ValueError:
        return None
    if len(image) < 2 or len(host) < 2 or image[0] != host[0] or compare_driver(image_sw, host_sw) >= 0:
        return None
    return {host[1] - 1: "one release", host[1]: "a patch release"}.get(image[1])
