"""The smoke test: what runs inside an image, what guards its start, and how its result is judged.

    workload.py   the stdlib-and-torch script copied into every image: finds the backend, checks the
                  build is what the tag says, runs a small real workload, prints one JSON report
    facts.py      the stdlib-and-torch script each build runs in its final stage, with no device:
                  writes what the image's torch holds (facts.json) and the constraints pinning it all
    guard.sh      the image's entry point (under tini): refuses a host the image cannot serve, with the reason
    banner.sh     what an interactive shell in the image says first: which image, torch and device
    judge.py      the report against what the variant promises
    launcher.py   runs the workload in a container with the vendor's device options
    allreduce.py  the stdlib-and-torch script each node of `smoke --nodes N` runs under torchrun: one exact
                  all-reduce and its bandwidth, one JSON report
    nodes.py      runs that script in N containers of an image on a network made for the run, and judges them
    integrity.py  what the image holds, checked from outside, so a forged report is caught
    records.py    the smoke passes and builds this state directory remembers

May import: vendors, model, and the shared leaves. Nothing here renders or builds.
"""
