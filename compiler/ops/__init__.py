"""Op declarations. Importing this package registers every op in ``REGISTRY``."""
from . import base, sources, elementwise, reduction, array, linalg, state, nn  # noqa: F401
from .base import REGISTRY, LoopNest, OpDef  # noqa: F401
