"""Op declarations. Importing this package registers every op in ``REGISTRY``.

The modules import one another in one direction only (``tests/compiler/test_layering.py`` checks it),
each from the layers above it:

1. ``rules`` (rule pieces many ops share), then ``base`` (``OpDef``, ``apply``, constants);
2. ``broadcast`` (broadcast_to/like, sum_to), ``array`` (transpose, reshape, …), ``gather``;
3. ``elementwise`` and ``linalg`` (their gradients unbroadcast); ``slicing``; ``state``;
4. ``padding`` and ``joining`` (built on slices); ``sources`` (placeholders, ``Variable``);
5. ``reduction``; ``conv``; ``random_seed`` (seeds and the run counter);
6. ``random``; then ``nn``, which composes all of them. ``control`` (branch and loop declarations)
   needs only ``rules`` and ``base``.
"""
from . import (array, base, broadcast, control, conv, elementwise, gather, joining, linalg, nn, padding,  # noqa: F401
               random, random_seed, reduction, rules, slicing, sources, state)
from .base import REGISTRY, LoopNest, OpDef  # noqa: F401
