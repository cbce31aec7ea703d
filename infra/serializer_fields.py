"""Serializer fields stricter than DRF's defaults (a number is not text; NUL never reaches PostgreSQL)."""
from rest_framework import serializers


def _contains_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_contains_nul(v) for v in value)
    return False


class _OnlyJsonType:
    """Takes only values of one JSON type (json_type), failing with the error named wrong_type otherwise."""

    json_type: type
    wrong_type: str

    def to_internal_value(self, data):
        if not isinstance(data, self.json_type):
            self.fail(self.wrong_type)
        return super().to_internal_value(data)


class StrictCharField(_OnlyJsonType, serializers.CharField):
    json_type, wrong_type = str, "not_a_string"
    default_error_messages = {"not_a_string": "Must be a string."}


class JsonObjectField(serializers.DictField):
    """A JSON object stored in a jsonb column: PostgreSQL cannot hold the NUL character anywhere inside it."""

    default_error_messages = {"null_character": "Null characters are not allowed."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if _contains_nul(value):
            self.fail("null_character")
        return value


class StrictBooleanField(_OnlyJsonType, serializers.BooleanField):
    """Only JSON true or false: DRF's own field also takes "yes", "1" and 0, which a schema calls invalid."""

    json_type, wrong_type = bool, "not_a_boolean"
    default_error_messages = {"not_a_boolean": "Must be true or false."}
