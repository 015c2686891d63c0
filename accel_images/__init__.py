"""accel-images: one consistent family of PyTorch images across accelerator vendors.

The package is laid out as the pipeline runs, matrix -> variants -> build contexts -> builds ->
smoke results -> publish -> report, with the knowledge behind it below and the user's side of the
images (which image fits this host, how it runs) above. Each subpackage says what it owns in its
own docstring. Imports run one way only, down this list; packages on one line never import each
other (tests/unit/test_architecture.py holds the rule, docs/architecture.md draws it):

    cli                   the `accel-images` command: thin, one module per command group
    host                  this host: detection, `recommend`, `pull`, `run`, devcontainer
    publish  report       promote on green, the nightly, retention, the registry's catalogue; reports
    builder  supply       render + build + smoke one variant, engine, bases; SBOM and provenance
    smoke    render       the in-image workload, guard and judge; variants -> build contexts
    plan                  matrix.yaml -> variants (expansion, selection, known values)
    kb                    the knowledge base: its answers, `kb check` and `kb update`
    vendors               one module per vendor behind one protocol: the only place that names one
    model                 the values every floor trades in: knowledge rows, Variant, tags, devices
    (modules here)        shared leaves: errors, versions, state, lock, stopping, formatting,
                          resources, credentials, untrusted (bounded reads of outside input),
                          registry (the Registry HTTP API client)
"""

__version__ = "0.1.0"
