"""Building variants: render a context, resolve and pin the base, skip what is unchanged, build
through the engine, smoke-test; and handing builds to engines elsewhere (CI matrix, bake).

    builder.py      one variant from context to smoke result
    engine.py       the only module that talks to Docker
    settings.py     what a build is asked to do, apart from the variant
    fingerprint.py  the content hash that decides whether to rebuild
    bases.py, pin.py, mirror_check.py   base images: digests, locks, mirrors
    wheels.py, pip_target.py   the run's wheelhouse: each wheel fetched once on the host, by pip
    workers.py, progress.py, outcome.py, failure.py, apt_causes.py, buildlog.py, leftovers.py
                    running many, showing them, saying what happened and why it failed
    fanout.py       GitHub Actions job matrix and docker-bake.json

May import: smoke, render, plan, kb, vendors, model, and the shared leaves.
"""
