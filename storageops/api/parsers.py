"""JSON bodies with bounds: nesting depth and NUL characters are refused as parse errors.

Python's json module recurses once per level, so a body of 100,000 '[' ends in RecursionError
(a 500), and a moderately deep one can still fail later when a JSON field is saved. PostgreSQL
refuses NUL in text and in jsonb alike: caught here, it is one clear 400 for every field.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def check_json(value: object, max_depth: int) -> None:
    """Raises ParseError when value nests deeper than max_depth or holds a NUL character."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                raise ParseError(f"JSON nested deeper than {max_depth} levels is not accepted.")
            children = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for key, child in children:
                if isinstance(key, str) and "\x00" in key:
                    raise ParseError("JSON with NUL characters (\\u0000) is not accepted.")
                stack.append((child, depth + 1))
        elif isinstance(item, str) and "\x00" in item:
            raise ParseError("JSON with NUL characters (\\u0000) is not accepted.")


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                f"JSON nested deeper than {settings.STORAGEOPS_MAX_JSON_DEPTH} levels is not accepted."
            ) from None
        check_json(data, settings.STORAGEOPS_MAX_JSON_DEPTH)
        return data
