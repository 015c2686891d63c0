"""Publishing: promote on green, the nightly rebuild, dated-tag retention, and what a registry holds.

    promote.py    a built image reaches its real tags only after its smoke test passed
    nightly.py    rebuild only what changed, publish only what passed
    tested.py     which digests this tool smoke-tested, kept beside the images
    retention.py  which dated tags go
    catalogue.py  which images a registry publishes now, what each promises, which passed

May import: build, supply, smoke, plan, kb, vendors, model, and the shared leaves (the registry
client among them).
"""
