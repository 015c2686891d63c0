"""accel-images: one consistent family of PyTorch images across accelerator vendors."""

__version__ = "0.1.0"
