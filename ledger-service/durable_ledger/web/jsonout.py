"""Strict JSON out: the service never emits NaN or Infinity, which JSON.parse rejects.

Input checks refuse non-finite numbers, but rows written before them (or arithmetic such as a
cost total) could still hold one; one such value would make every read of the job invalid
JSON for the n8n node. Such values are rendered as null.
"""

import math

from flask.json.provider import DefaultJSONProvider


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class StrictJSONProvider(DefaultJSONProvider):
    def dumps(self, obj, **kwargs):
        kwargs["allow_nan"] = False
        try:
            return super().dumps(obj, **kwargs)
        except ValueError:  # "Out of range float values are not JSON compliant"
            return super().dumps(_finite(obj), **kwargs)
