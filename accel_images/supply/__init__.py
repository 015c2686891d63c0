"""Supply-chain records of a published image: its SBOM, its signed provenance, how both are
attached to it in the registry, and how they are checked.

    sbom.py        what is inside: the dpkg database and the Python environment, as CycloneDX JSON
    probe.py       the stdlib-only script that reads both inside the image
    provenance.py  who built it from what, and that it passed its smoke test: an in-toto
                   Statement with a SLSA provenance predicate, signed as a DSSE envelope
    attach.py      both as OCI artifacts whose `subject` is the image's digest (referrers API,
                   or the referrers tag schema on registries without it)
    attest.py      the publish-path hook that makes and attaches both for one pushed image
    packages.py    the SBOM's inventory as a page people read, written beside it per image
    verify.py      the check `accel-images verify` and the nightly's alias gate run
    trust.py       whether an image a tag lists is trusted as the tag's image of one platform: the one
                   decision verify, the catalogue (recommend, pull, run) and the nightly share
"""
