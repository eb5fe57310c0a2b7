"""Op declarations. Importing this package registers every op in ``REGISTRY``."""
from . import (array, base, conv, elementwise, indexing, linalg, nn, random, reduction, sources,  # noqa: F401
               state)
from .base import REGISTRY, LoopNest, OpDef  # noqa: F401
