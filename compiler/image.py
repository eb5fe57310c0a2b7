"""``cc.image``: TF1's ``tf.image`` ops (``ops/image.py``).

>>> import compiler as cc
>>> cc.image.resize_images(cc.placeholder("float32", (None, 4, 4, 3)), [8, 6]).shape
(None, 8, 6, 3)
"""
from .ops.image import (ResizeMethod, adjust_brightness, adjust_contrast, central_crop,  # noqa: F401
                        flip_left_right, flip_up_down, per_image_standardization, random_brightness,
                        random_flip_left_right, random_flip_up_down, resize_bilinear, resize_images,
                        resize_nearest_neighbor, rgb_to_grayscale, total_variation)
from .ops.random import random_crop  # noqa: F401
