"""`python -m accel_images` is the same as the `accel-images` command."""

from accel_images.cli import main

main()
