"""`-h`: the help on one screen, one line per option; `--help` keeps typer's full text (as ripgrep
and git split them).

Both are made from the click command's own parameters, so an option is declared once (options.py,
or the command's signature) and listed by each: under -h, the first sentence of its help, cut to
the terminal's width; the rest under --help only. Nothing here imports a model library.
"""

from __future__ import annotations

import copy
import inspect
import re
import shutil
import textwrap
from enum import Enum
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

FULL_HELP = "Show this message and exit (-h: one line per option)."
SHORT_HELP = "This short help; --help: the full one"
DEFAULT_PANEL = "Options"
TYPE_NAMES = {"str": "TEXT", "int": "INT", "float": "FLOAT", "Path": "PATH"}
MIN_WIDTH = 40
# A choice shows as {a,b,c} while that leaves this much of the line for its help; else its TYPE.
HELP_ROOM = 30
# Options whose names and value are longer than this share of the width push their own help right.
LEFT_COLUMN = 0.34


class BriefHelp:
    """Mixed into the command classes: `-h` prints `brief(ctx)`; no `<bool>` after a flag."""

    _brief_option: Any = None

    def get_help_option(self, ctx: typer.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.help = FULL_HELP
        return option

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # typer prints the type of a flag too: <bool>
        short = self.brief_option(ctx)
        return params if short is None else [*params, short]

    def brief_option(self, ctx: typer.Context) -> Any:
        """`-h`: the help option under another name, with another page (made once: click orders
        eager options by identity)."""
        if self._brief_option is None and "-h" not in ctx.help_option_names:
            template = self.get_help_option(ctx)
            taken = {name for param in self.params for name in param.opts + param.secondary_opts}
            if template is None or "-h" in taken:
                return None
            option = copy.copy(template)
            option.opts, option.secondary_opts = ["-h"], []
            option.hidden, option.help, option.callback = True, SHORT_HELP, show_brief
            self._brief_option = option
        return self._brief_option


class PldCommand(BriefHelp, TyperCommand):
    pass


class PldGroup(BriefHelp, TyperGroup):
    pass


def show_brief(ctx: typer.Context, _param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        typer.echo(brief(ctx))
        ctx.exit()


def brief(ctx: typer.Context, width: int | None = None) -> str:
    """Usage, the command's first line, then one line per command and option, grouped by panel."""
    width = max(width or shutil.get_terminal_size().columns, MIN_WIDTH)
    command = ctx.command
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    usage = [ctx.command_path, "[OPTIONS]", *(argument_name(a) for a in arguments)]
    if isinstance(command, TyperGroup):
        usage.append("COMMAND [ARGS]...")
    lines = [f"Usage: {' '.join(usage)}", ""]
    about = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
    if about:
        lines += [*textwrap.wrap(about, width), ""]
    sections: dict[str, list[tuple[str, str]]] = {}
    if arguments:
        sections["Arguments"] = [(f"  {argument_name(a)}", summary(a)) for a in arguments]
    if isinstance(command, TyperGroup):
        sections["Commands"] = [
            (f"  {name}", first_sentence(sub.help or ""))
            for name in command.list_commands(ctx)
            if (sub := command.get_command(ctx, name)) is not None and not sub.hidden
        ]
    options = [p for p in params if p.param_type_name == "option"]
    sections[DEFAULT_PANEL] = []
    help_option = command.get_help_option(ctx)
    for option in options:
        panel = getattr(option, "rich_help_panel", None) or DEFAULT_PANEL
        line = ("  -h, --help", SHORT_HELP) if option is help_option else None
        line = line or (option_names(option, width), summary(option))
        sections.setdefault(panel, []).append(line)
    lefts = [len(left) for rows in sections.values() for left, _ in rows]
    column = max((n for n in lefts if n <= width * LEFT_COLUMN), default=0)
    for title, rows in sections.items():
        if rows:
            lines += [f"{title}:", *(row(left, text, column, width) for left, text in rows), ""]
    lines.append(f"Full help: {ctx.command_path} --help")
    return "\n".join(lines)


def row(left: str, text: str, column: int, width: int) -> str:
    left = left.ljust(column)
    room = width - len(left) - 2
    return f"{left}  {fit(text, room)}".rstrip() if room > 0 else left


def summary(param: Any) -> str:
    """The first sentence of its help, then what it needs that the line would hide."""
    text = first_sentence(param.help or "")
    if param.required and param.param_type_name == "option":
        text += " (required)"
    envvar = param.envvar if isinstance(param.envvar, str) else None
    return f"{text} (${envvar})" if envvar else text


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    return re.split(r"(?<=\.)\s", text, maxsplit=1)[0].removesuffix(".")


def fit(text: str, room: int) -> str:
    """The text if it fits, else its longest leading clause that does (cut before a `; `, else
    before a ` (`, outside parentheses), else its words that do, with an ellipsis. A trailing
    `($ENVVAR)` or `(required)` stays."""
    if len(text) <= room:
        return text
    tail = re.search(r" \((\$\w+|required)\)$", text)
    end = tail.group(0) if tail else ""
    body, room = text[: len(text) - len(end)], room - len(end)
    cuts: dict[str, list[int]] = {"; ": [], " (": []}
    depth = 0
    for i, char in enumerate(body[: room + 1]):
        if body[i : i + 2] in cuts and depth == 0 and i > 0:
            cuts[body[i : i + 2]].append(i)
        depth += {"(": 1, ")": -1}.get(char, 0)
    clause = cuts["; "] or cuts[" ("]
    if clause:
        return body[: clause[-1]] + end
    space = body.rfind(" ", 0, room)
    words = body[:space] if space > 0 else body[: max(room - 1, 0)]
    return words.rstrip(",;:") + "…" + end


def option_names(option: Any, width: int) -> str:
    """`  -m, --model TEXT`, `      --[no-]live`, `      --backup[=SUFFIX]`, `--dtype {a,b}`."""
    shorts = [name for name in option.opts if not name.startswith("--")]
    longs = [name for name in option.opts if name.startswith("--")]
    negated = [f"--no-{name[2:]}" for name in longs]
    if option.secondary_opts == negated:
        longs = [f"--[no-]{name[2:]}" for name in longs]
    else:
        longs += option.secondary_opts
    left = ("  " if shorts else "      ") + ", ".join(shorts + longs)
    if getattr(option, "is_flag", False) or getattr(option, "count", False):
        return left
    if option.metavar:
        return left + ("" if option.metavar.startswith("[") else " ") + option.metavar
    choices = choice_names(option)
    shown = f"{left} {{{','.join(choices)}}}"
    if choices and len(shown) <= width - HELP_ROOM:
        return shown
    return f"{left} {option.name.upper() if choices else type_name(option)}"


def argument_name(argument: Any) -> str:
    name = argument.metavar or argument.name.upper()
    name = name if argument.required else f"[{name}]"
    return f"{name}..." if argument.nargs == -1 else name


def choice_names(param: Any) -> list[str]:
    descriptor = getattr(param, "type_descriptor", None)
    found = descriptor.choices if descriptor else getattr(param.type, "choices", None)
    return [c.value if isinstance(c, Enum) else str(c) for c in found or ()]


def type_name(param: Any) -> str:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:  # click's own types
        return param.type.name.upper()
    if descriptor.is_path:
        return "PATH"
    return TYPE_NAMES.get(getattr(descriptor.annotation, "__name__", ""), "VALUE")
