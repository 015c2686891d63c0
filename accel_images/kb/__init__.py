"""The compatibility knowledge base: what exists, what works together, and how to keep it true.

    compat.py   load the data files (accel_images/data/) and answer: which stacks a torch has,
                whether a combination works and why not, `accel-images compat`
    sources.py  the upstream sources (package index, wheel index, registries), fetched and parsed
    check.py    `accel-images kb check`: what the knowledge base lacks or has wrong
    update.py   `accel-images kb update`: write what `kb check` found into the data files
    claims.py   what the knowledge base predicts a variant's image holds, checked against the facts the
                image's own torch gave at build time; a contradiction names the row to fix
    wheels.py   the wheel platform tags a machine and glibc accept (`kb wheel-tags`, the run's host fetch)

May import: vendors (each vendor reads its own section), model, and the shared leaves.
"""
