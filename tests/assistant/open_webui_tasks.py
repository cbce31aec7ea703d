"""Open WebUI's background task prompts, filled in as Open WebUI fills them, for tests of a chat UI's tasks.

Each template follows the structure of Open WebUI's default (open_webui/config.py, DEFAULT_*_GENERATION_PROMPT_TEMPLATE,
0.6 to 0.12): the same headings in the same order, the same placeholders and the same output lines; the guideline
bullets are shortened here. Open WebUI fills `{{MESSAGES:END:n}}` with the chat's last n messages, one
`ROLE: text` line each (open_webui/utils/task.py get_messages_content), and sends the result as the request's one
user message, `stream: false`, `max_completion_tokens` from the model's params (1,000 by default for the title).
"""
from __future__ import annotations

import re

TITLE = """### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
- Write the title in the chat's primary language; default to English if multilingual.
- Prioritize accuracy over excessive creativity; keep it clear and simple.
- Your entire response must consist solely of the JSON object.
### Output:
JSON format: { "title": "your concise title here" }
### Examples:
- { "title": "📉 Stock Market Trends" },
- { "title": "🎮 Video Game Development Insights" }
### Chat History:
<chat_history>
{{MESSAGES:END:2}}
</chat_history>"""

TAGS = """### Task:
Generate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 more specific subtopic tags.

### Guidelines:
- Start with high-level domains (e.g. Science, Technology, Philosophy, Arts, Politics, Business, Health)
- If content is too short (less than 3 messages) or too diverse, use only ["General"]
- Use the chat's primary language; default to English if multilingual

### Output:
JSON format: { "tags": ["tag1", "tag2", "tag3"] }

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>"""

FOLLOW_UPS = """### Task:
Suggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in this conversation as a \
**user**, based on the chat history, to help continue or deepen the discussion.
### Guidelines:
- Write all follow-up questions from the user's point of view, directed to the assistant.
- Make questions concise, clear, and directly related to the discussed topic(s).
- Response must be a JSON object with a "follow_ups" key containing an array of strings, no extra text or formatting.
### Output:
JSON format: { "follow_ups": ["Question 1?", "Question 2?", "Question 3?"] }
### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>"""

QUERIES = """### Task:
Analyze the chat history to determine the necessity of generating search queries, in the given language. By \
default, **prioritize generating 1-3 broad and relevant search queries** unless it is absolutely certain that no \
additional information is required.

### Guidelines:
- Respond **EXCLUSIVELY** with a JSON object.
- When generating search queries, respond in the format: { "queries": ["query1", "query2"] }
- If and only if it is entirely certain that no useful results can be retrieved by a search, return: { "queries": [] }.
- Today's date is: {{CURRENT_DATE}}.

### Output:
Strictly return in JSON format:
{
  "queries": ["query1", "query2"]
}

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>
"""

AUTOCOMPLETE = """### Task:
You are an autocompletion system. Continue the text in `<text>` based on the **completion type** in `<type>` and the \
given language.

### **Instructions**:
1. Analyze `<text>` for context and meaning.
2. Use `<type>` to guide your output.
3. If unsure, return: `{ "text": "" }`.

### **Output Rules**:
- Respond only in JSON format: `{ "text": "<your_completion>" }`.

### **Examples**:
#### Example 1:
Input:
<type>General</type>
<text>The sun was setting over the horizon, painting the sky</text>
Output:
{ "text": "with vibrant shades of orange and pink." }

---
### Context:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>
<type>{{TYPE}}</type>
<text>{{PROMPT}}</text>
#### Output:
"""

IMAGE_PROMPT = """### Task:
Generate a detailed prompt for an image generation task based on the given language and context.

### Guidelines:
- Be descriptive and detailed, focusing on the most important aspects of the image.

### Output:
Strictly return in JSON format:
{
    "prompt": "Your detailed description here."
}

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>"""

EMOJI = """Your task is to reflect the speaker's likely facial expression through a fitting emoji. Interpret emotions \
from the message and reflect their facial expression using fitting, diverse emojis (e.g., 😊, 😢, 😡, 😱).

Message: ```{{prompt}}```"""

TEMPLATES = {"title": TITLE, "tags": TAGS, "follow_ups": FOLLOW_UPS, "queries": QUERIES,
             "autocomplete": AUTOCOMPLETE, "image_prompt": IMAGE_PROMPT, "emoji": EMOJI}


def chat_lines(messages: list[dict]) -> str:
    return "\n".join(f"{m['role'].upper()}: {m['content']}" for m in messages)


def filled(template: str, messages: list[dict], *, prompt: str = "", kind: str = "General",
           date: str = "2026-12-05") -> str:
    """The template as Open WebUI sends it for a chat whose messages are `messages` (role and content dicts)."""
    def last(match: re.Match) -> str:
        return chat_lines(messages[-int(match.group(1)):])

    text = re.sub(r"\{\{MESSAGES:END:(\d+)\}\}", last, template)
    text = text.replace("{{MESSAGES}}", chat_lines(messages))
    for name, value in (("{{CURRENT_DATE}}", date), ("{{TYPE}}", kind), ("{{PROMPT}}", prompt),
                        ("{{prompt}}", prompt)):
        text = text.replace(name, value)
    return text


def task_request(template: str, messages: list[dict], **kwargs) -> list[dict]:
    """The request's messages: one user message, the filled template."""
    return [{"role": "user", "content": filled(template, messages, **kwargs)}]
