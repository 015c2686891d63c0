"""The values every floor of the package trades in, and nothing that acts on them.

    knowledge.py   the knowledge base as data: release and OS rows, vendor sections, a combination
                   of matrix axes (Combo) and what the knowledge base resolves it to (Resolution)
    variant.py     Variant: one frozen value per image, with its labels
    tags.py        the tag scheme, in one place
    devices.py     what a container needs to reach a device (DeviceOptions, SessionSettings), and
                   the look-ups under a host's /dev and /sys that vendors share
    hostinfo.py    what a host offers (HostInfo), and the small tools vendor probes share
    reference.py   image references and registry mirrors
    imagefacts.py  a built image's facts (/opt/accel-images/facts.json) and a knowledge-base Claim
                   about them, with the row that makes it
    wheels.py      a wheel a build installs, as the run fetched it (for the provenance)

May import: the shared leaves at the package's top (errors, versions). Everything else imports
these; a vendor module names them while the knowledge base looks vendors up, so they sit below both.
"""
