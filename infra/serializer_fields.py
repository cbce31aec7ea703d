"""Serializer fields stricter than DRF's defaults (a number is not text)."""
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)
