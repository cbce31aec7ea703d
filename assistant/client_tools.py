"""A client's own tools in an assistant turn: offered to the model beside the memory tools, called by the model, run
by the client (the turn ends with the calls; the client's next request brings their results)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from infra.errors import ValidationFailed

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS = 128  # OpenAI's own limit
CHOICES = ("auto", "none", "required")
# A memory tool whose name a client tool takes is offered under this prefix (the client's call must keep its name).
MEMORY_PREFIX = "memory_"


def _invalid(message: str, param: str) -> ValidationFailed:
    return ValidationFailed(message, code="invalid_request", details={"param": param})


@dataclass(frozen=True)
class ClientTools:
    """The client's function tools and how the model may use them, as a request states them."""

    definitions: list[dict] = field(default_factory=list)  # {"type": "function", "function": {name, ...}}
    choice: str = "auto"  # auto | none | required | function (the named one, `forced`)
    forced: str | None = None
    parallel: bool = True

    @property
    def names(self) -> list[str]:
        return [d["function"]["name"] for d in self.definitions]


def client_function(*, name, description=None, parameters=None, strict=None, param: str = "tools") -> dict:
    """One client function as the model is offered it; ValidationFailed (with `param`) for what OpenAI refuses."""
    if not isinstance(name, str) or not NAME.match(name):
        raise _invalid("A tool's function name must be 1-64 letters, digits, underscores or dashes.", param)
    if description is not None and not isinstance(description, str):
        raise _invalid(f"The description of tool '{name}' must be a string.", param)
    if parameters is not None and not isinstance(parameters, dict):
        raise _invalid(f"The parameters of tool '{name}' must be a JSON Schema object.", param)
    function = {"name": name, "description": description or "",
                "parameters": parameters if parameters is not None else {"type": "object", "properties": {}}}
    if isinstance(strict, bool):
        function["strict"] = strict
    return {"type": "function", "function": function}


def client_tools_build(*, definitions: list[dict], choice, parallel, choice_name=None,
                       tools_param: str = "tools") -> ClientTools:
    """Check the tool set and the choice together: names unique, a named or required choice needs tools."""
    if len(definitions) > MAX_TOOLS:
        raise _invalid(f"At most {MAX_TOOLS} tools.", tools_param)
    names = [d["function"]["name"] for d in definitions]
    duplicate = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if duplicate:
        raise _invalid(f"Tool names must be unique; '{duplicate}' is given twice.", tools_param)
    if parallel is None:
        parallel = True
    if not isinstance(parallel, bool):
        raise _invalid("'parallel_tool_calls' must be a boolean.", "parallel_tool_calls")
    if choice is None:
        choice = "auto"
    if choice not in (*CHOICES, "function"):
        raise _invalid("'tool_choice' must be 'none', 'auto', 'required' or a function to call.", "tool_choice")
    if choice in ("required", "function") and not definitions:
        raise _invalid(f"tool_choice '{choice}' needs tools to choose from.", "tool_choice")
    if choice == "function" and choice_name not in names:
        raise _invalid(f"tool_choice names '{choice_name}', which is not among the tools.", "tool_choice")
    return ClientTools(definitions=definitions, choice=choice, forced=choice_name if choice == "function" else None,
                       parallel=parallel)


@dataclass(frozen=True)
class Toolset:
    """What one turn offers the model: the definitions, which offered names are memory tools (and their own names),
    which are the client's, and the tool_choice for each step."""

    definitions: list[dict]
    memory: dict[str, str]  # offered name -> memory tool name
    client: frozenset[str]
    step_choice: str  # auto | required (a named choice is offered as its one tool, required)
    parallel: bool = True

    def client_only(self) -> list[dict]:
        return [d for d in self.definitions if d["function"]["name"] in self.client]


def toolset_for_turn(memory_definitions: list[dict], client: ClientTools | None) -> Toolset:
    """Memory tools and the client's, as OpenAI's tool_choice asks: `none` keeps the client's tools from the model
    (memory tools still run: the client never sees them); a named tool is the only one offered, and required (so
    servers without named choices force it too); `required` keeps the memory tools, the loop's last step offers
    only the client's."""
    client = client or ClientTools()
    taken = set(client.names)
    memory, offered = {}, []
    if client.choice != "function":
        for definition in memory_definitions:
            own = definition["function"]["name"]
            name = own if own not in taken else MEMORY_PREFIX + own
            if name in taken:
                continue  # both names are the client's: its tools win, this memory tool sits the turn out
            memory[name] = own
            offered.append({**definition, "function": {**definition["function"], "name": name}})
    if client.choice == "function":
        offered = [d for d in client.definitions if d["function"]["name"] == client.forced]
    elif client.choice != "none":
        offered += client.definitions
    client_names = frozenset(d["function"]["name"] for d in offered) - set(memory)
    step_choice = "required" if client.choice in ("required", "function") else "auto"
    return Toolset(definitions=offered, memory=memory, client=client_names, step_choice=step_choice,
                   parallel=client.parallel)
