"""What to build: matrix.yaml parsed, its values checked, expanded into variants.

    matrix.py    matrix.yaml -> Matrix, with file:line:field errors (yamlpos.py keeps positions)
    known.py     a value the knowledge base does not know is a typo, not a prune
    variants.py  expansion (the knowledge base prunes, with reasons), selection by the CLI's filters

May import: kb, vendors, model, and the shared leaves.
"""
