"""The user's side: which accelerator this host has, which image fits it, how to run it.

    detect.py     host detection through each vendor's probe
    recommend.py  which published image fits this host, and its run line
    choosing.py   from what to choose: a registry's catalogue or the matrix
    launch.py     how one image runs on this host (Launch): the one model every runtime reads
    runtimes/     one renderer per runtime: docker, podman, apptainer, enroot, kubernetes, compose
    session.py    `accel-images run` and `devcontainer`: a development container on this host

May import: publish (the catalogue), plan, kb, vendors, model, and the shared leaves.
"""
