"""Mapping a report's benchmark command line (and/or benchmark name) onto a vetted recipe.

The command is tokenized with :mod:`shlex` rules on a copy and **never executed**: the one
benchmark command is picked out of a pasted shell line (``sync; echo 3 > drop_caches; dd ...
2>&1 | tail -1``), then handed to the registry recipes whose ``tools`` contain its command word;
each recipe's :meth:`~bot.lab.recipes.base.Recipe.claim` maps the options it knows onto bounded
parameters or declines.  Shell substitutions (``$``, backticks), subshells, unknown commands
chained with ``;``/``&&``/``|``, unknown options, non-ASCII digits and values outside the
whitelists are declined with the reason.

Policy for values outside the bounds: *extent* parameters whose metric is a rate (count/size,
iterations, loops, runtime/time) are **clamped** to the cap with a note recorded in
``RecipeSpec.notes`` (``clamp = false`` in ``[lab]`` declines instead); *shape* parameters (block
size, threads/jobs/groups, I/O mode, engine, queue depth, stressor) outside their whitelist or
bounds are **declined**.
"""

from __future__ import annotations

import re
import shlex

from bot.lab.recipes.base import REGISTRY, Decline, Limits, RecipeError, word
from bot.lab.recipes.spec import RecipeSpec, make_recipe

MAX_COMMAND_CHARS = 2000

# harmless segments around a benchmark command in a pasted shell line (never executed anyway)
_PREFIX_WORDS = {"sudo", "time", "nice", "ionice", "taskset", "numactl", "command", "exec", "/usr/bin/time"}
_FILTER_CMDS = {"tail", "head", "grep", "egrep", "tee", "cat", "awk", "sort", "less"}
_BENIGN_SEGMENTS = {("sync",), ("echo", "3"), ("echo", "1"), ("echo", "2")}


def _segments(command: str) -> list[list[str]]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lex.whitespace_split = True
    lex.commenters = ""
    tokens = list(lex)
    segs: list[list[str]] = [[]]
    redirect = False
    for tok in tokens:
        if tok in (";", "&&", "||", "|", "&", ";;", "|&"):
            segs.append([])
            redirect = False
            continue
        if tok and set(tok) <= set("<>&"):
            redirect = True  # the next word is a redirection target: not an argument
            if segs[-1] and segs[-1][-1] in ("0", "1", "2"):
                segs[-1].pop()  # the fd number of "2>&1" / "2> log"
            continue
        if tok in ("(", ")", "((", "))", "()"):
            raise Decline("the command contains a subshell or grouping")
        if redirect:  # "> /proc/sys/vm/drop_caches", "2>&1": dropped (nothing is ever executed)
            redirect = False
            continue
        segs[-1].append(tok)
    return [s for s in segs if s]


def _strip_prefix(argv: list[str]) -> list[str]:
    i = 0
    while i < len(argv):
        w = argv[i]
        if w in _PREFIX_WORDS:
            i += 1
            # skip option-looking words and numeric args of prefixes (taskset -c 0, nice -n 10)
            while i < len(argv) and (argv[i].startswith("-") or re.fullmatch(r"[0-9,.-]+", argv[i])):
                i += 1
            continue
        if re.fullmatch(r"[A-Z_][A-Z0-9_]*=[A-Za-z0-9_./:-]*", w):  # env assignment
            i += 1
            continue
        break
    return argv[i:]


def main_segment(command: str) -> list[str]:
    """The benchmark command's argv out of a pasted shell line (Decline if there is not one)."""
    if not isinstance(command, str) or not command.strip():
        raise Decline("empty command")
    if len(command) > MAX_COMMAND_CHARS:
        raise Decline(f"command longer than {MAX_COMMAND_CHARS} characters")
    if any(ord(c) < 32 and c not in "\t\n" for c in command) or "\x7f" in command:
        raise Decline("command contains control characters")
    if "$" in command or "`" in command:
        raise Decline("command contains shell substitution or variables ($ or backtick); "
                      "only literal values can be vetted")
    if "\n" in command.strip():
        raise Decline("multi-line command; paste one benchmark command line")
    try:
        segs = _segments(command)
    except ValueError as exc:
        raise Decline(f"cannot tokenize the command: {exc}") from None
    main: list[str] | None = None
    for seg in segs:
        argv = _strip_prefix(seg)
        if not argv:
            continue
        if tuple(argv[:2]) in _BENIGN_SEGMENTS or tuple(argv[:1]) in _BENIGN_SEGMENTS:
            continue
        if main is not None and argv[0] in _FILTER_CMDS:
            continue
        if main is not None:
            raise Decline(f"more than one command in the line ({main[0]!r} and {argv[0]!r})")
        main = argv
    if main is None:
        raise Decline("no benchmark command found")
    return main


def _tools() -> dict[str, list]:
    out: dict[str, list] = {}
    for rec in REGISTRY.values():
        for t in rec.tools:
            out.setdefault(t, []).append(rec)
    return out


def _claim_command(argv: list[str], limits: Limits) -> tuple[str, dict, list[str]]:
    tool = argv[0].rsplit("/", 1)[-1] if argv[0].startswith("/") else argv[0]
    tools = _tools()
    if tool not in tools:
        raise Decline(f"no vetted recipe for command {word(tool)!r} (vetted: {', '.join(sorted(tools))})")
    for rec in tools[tool]:
        got = rec.claim([tool] + argv[1:], limits)
        if got is not None:
            return got
    vetted = "; ".join(r.claim_doc or r.name for r in tools[tool])
    raise Decline(f"no vetted {tool} recipe for this command line (vetted: {vetted})")


def recipe_for_benchmark(benchmark: str | None):
    """The registry recipe a benchmark name (``hackbench``, ``fio.write_iops``) refers to, or None."""
    key = benchmark.strip().lower().split(".", 1)[0] if isinstance(benchmark, str) else ""
    for rec in REGISTRY.values():
        if key and (key == rec.name or key in rec.aliases):
            return rec
    return None


def recipe_from_claim(config: dict | None, command: str | None, benchmark: str | None
                      ) -> tuple[RecipeSpec | None, str]:
    """Map a report's benchmark command line (and/or benchmark name) to a vetted recipe.

    Returns ``(spec, reason)``: ``spec`` is None when declined and ``reason`` says why; on
    success ``reason`` summarises the mapping and ``spec.notes`` records every substitution
    (paths from mail replaced by the scratch area) and every clamp (see the module docstring).
    """
    try:
        limits = Limits.from_config(config)
    except RecipeError as exc:
        return None, f"lab configuration: {exc}"
    try:
        if command:
            argv = main_segment(command)
            name, params, notes = _claim_command(argv, limits)
            named = recipe_for_benchmark(benchmark)
            if named is not None and named.name != name and not set(named.tools) & set(REGISTRY[name].tools):
                notes.append(f"benchmark {word(benchmark)!r} differs from the command; the command wins")
            spec = make_recipe(name, params, config, notes=tuple(notes))
            return spec, f"{argv[0].rsplit('/', 1)[-1]} command mapped to {name} {spec.params}"
        if benchmark:
            rec = recipe_for_benchmark(benchmark)
            if rec is None:
                return None, f"no vetted recipe for benchmark {word(benchmark)!r} and no command line"
            params = rec.from_benchmark(benchmark.strip().lower())
            if params is None:
                # "fio" alone says nothing about the workload (rw mode, block size): refuse to guess
                return None, f"benchmark {word(benchmark)!r} without a command line: its parameters are unknown"
            spec = make_recipe(rec.name, params, config, notes=("default parameters: no command line in the report",))
            return spec, f"benchmark {benchmark!r} mapped to {rec.name} with {'default ' if not params else ''}" \
                         f"parameters {spec.params}"
        return None, "the report names neither a benchmark command nor a benchmark"
    except (Decline, RecipeError) as exc:
        return None, f"declined: {exc}"
