"""Small conversation exports in both formats, built in code, for the import tests."""
from __future__ import annotations

import json

LOCOMO_SAMPLE = {
    "sample_id": "mini-1",
    "qa": [],
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! Good to see you!"},
            {"speaker": "Melanie", "dia_id": "D1:2",
             "text": "Hi! I ran a charity race for mental health last Saturday."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "I went to a LGBTQ support group yesterday.",
             "blip_caption": "a photo of a rainbow flag"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "I painted a lake sunrise last year."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "I am researching adoption agencies."},
        ],
        "session_3_date_time": "8:00 pm on 1 July, 2023",
    },
}

OPENAI_EXPORT = [
    [  # a bare list of messages: ids and times come from its place in the file
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "I prefer aisle seats and I never fly United."},
        {"role": "assistant", "content": "Noted: aisle seats, no United."},
    ],
    {"id": "chat-42", "title": "Lisbon trip", "created_at": "2024-03-01T09:00:00Z", "messages": [
        {"id": "m1", "role": "user", "content": "I'm planning a trip to Lisbon in May.",
         "created_at": "2024-03-01T09:00:05Z"},
        {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Lovely. For how long?"}],
         "timestamp": 1709283610},
        {"id": "m3", "role": "user", "content": "   "},  # blank: nothing to store
        {"id": "m4", "role": "user", "content": "Ten days, and my budget is 180 euros a night."},
    ]},
]


def openai_conversation(conv_id: str, n: int, *, start: int = 1, created_at: str = "2024-01-01T00:00:00Z") -> dict:
    """One conversation of n alternating messages with ids m<start>..m<start+n-1>, a second apart."""
    return {"id": conv_id, "created_at": created_at, "messages": [
        {"id": f"m{i}", "role": "user" if i % 2 else "assistant",
         "content": f"Message {i}: I like topic number {i} a lot." if i % 2 else f"Reply {i}."}
        for i in range(start, start + n)]}


def as_bytes(data) -> bytes:
    return json.dumps(data).encode()
