"""`python -m builder` is the same as the `accel-images` command."""

from builder.cli import main

main()
