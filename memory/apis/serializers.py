"""How a retrieved memory leaves the service, wherever it is shown (search, composed context, turns)."""
from rest_framework import serializers


class RetrievedMemoryOutput(serializers.Serializer):
    memory_id = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    source_type = serializers.CharField()
    confidence = serializers.FloatField()
    created_at = serializers.DateTimeField()
    session_id = serializers.CharField(allow_null=True)
    source_message_id = serializers.CharField(allow_null=True)
    provenance = serializers.CharField()
    token_count = serializers.IntegerField()
    neighbours = serializers.ListField(child=serializers.CharField())
    valid_from = serializers.DateTimeField(allow_null=True, required=False,
                                           help_text="When it began to hold (given for a search as_of a time).")
    valid_to = serializers.DateTimeField(allow_null=True, required=False,
                                         help_text="When what superseded it was said; null while it holds.")
