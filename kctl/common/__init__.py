"""Bottom-layer utilities shared by every kctl package (config definitions). Imports nothing else
from kctl."""
