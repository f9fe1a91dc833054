"""Text -> AST. Loads `sched.lark` once; turns lark trees into `ppdsl.language.ast` nodes, syntax errors into
diagnostics."""

from __future__ import annotations

import contextlib
import difflib
import functools
import gc
import re
from collections.abc import Iterator

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import LexerThread
from lark.parsers.lalr_analysis import Shift
from lark.utils import TextSlice

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.text import source_lines
from ppdsl.language import ast, grammar_tables

MAX_SYNTAX_ERRORS = 10


def _parser() -> Lark:
    return grammar_tables.parser()


# Labelled bad inputs (lark's `match_examples`): the parser state they fail in tells which mistake it is.
_EXAMPLES: dict[tuple[str, str], list[str]] = {
    (
        "missing `:` between the condition and its message",
        'write `require <condition> : "<message>"`',
    ): ['require pp > 1 "message"', 'require microbatches >= pp "m"'],
    (
        "a loop range is written `start .. stop`",
        "write `for i in 0 .. n { ... }` (stop excluded)",
    ): ["order { for i in range(3) { forward } }", "order { for i in 3 { forward } }"],
    (
        "a block needs braces",
        "put the body in `{ ... }`",
    ): ["order forward", "order { repeat 3 forward }", "order { if rank == 0 forward }"],
    (
        "a job is repeated with `*`",
        "write `forward * n` or `repeat n { forward }`",
    ): ["order { forward x 3 }", "order { forward 3 }"],
}


@functools.lru_cache(maxsize=1)
def _example_states() -> dict[tuple[object, str], tuple[str, str]]:
    """(parser state, token) of each labelled bad input -> its label."""
    table = {}
    for label, examples in _EXAMPLES.items():
        for example in examples:
            try:
                _parser().parse(example)
            except UnexpectedToken as err:
                table.setdefault((err.state.position, err.token.type), label)
            except UnexpectedInput:
                continue
    return table


def _friendly_expected(expected: set[str] | frozenset[str], parser: Lark) -> list[str]:
    """Turn terminal names into what a reader would type."""
    names = {
        "NAME": "a name",
        "INT": "an integer",
        "DECIMAL": "a number",
        "SIGNED_INT": "an integer",
        "SIGNED_FLOAT": "a number",
        "STRING": 'a string "..."',
        "DOCSTRING": "a docstring",
        "COMP_OP": "a comparison",
        "ADD_OP": "`+` or `-`",
        "MUL_OP": "`*`, `//`, `%` or `/`",
        "MEMORY_VERB": "`allocates`, `frees`, `keeps` or `moves`",
        "$END": "end of file",
    }
    by_name = {t.name: t for t in parser.terminals}
    out = set()
    for name in expected:
        if name in names:
            out.add(names[name])
        elif name in by_name and by_name[name].pattern.type == "str":
            out.add(f"`{by_name[name].pattern.value}`")
        else:
            out.add(name.lower())
    return sorted(out)


def _syntax_diagnostic(err: UnexpectedInput, file: str, text: str, parser: Lark) -> Diagnostic:
    line, col = err.line if err.line > 0 else 1, err.column if err.column > 0 else 1
    label = ""
    help_text = ""
    width = 1
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            message = "unexpected end of file"
            lines = source_lines(text)  # (numbered as Lark numbers them: at `\n` only)
            line, col = len(lines), len(lines[-1]) + 1
        else:
            message = f"unexpected `{tok.value}`"
            width = max(len(str(tok.value).split("\n")[0]), 1)
        expected = _friendly_expected(err.expected, parser)
        label = "expected " + _join_or(expected) if expected else ""
    elif isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else "?"
        message = f"unexpected character `{ch}`"
        expected = _friendly_expected(err.allowed or set(), parser)
        label = "expected " + _join_or(expected) if expected else ""
        if ch == '"':
            help_text = 'strings are written on one line: "..."'
    else:  # UnexpectedEOF
        message = "unexpected end of file"
        expected = _friendly_expected(getattr(err, "expected", set()) or set(), parser)
        label = "expected " + _join_or(expected) if expected else ""
    found = None
    if not (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        try:
            found = err.match_examples(parser.parse, _EXAMPLES, use_accepts=True)
        except Exception:  # match_examples re-parses examples; never let it hide the real error
            found = None
        if found is None and isinstance(err, UnexpectedToken) and err.state is not None:
            # lark matches a state with its stack depth; an error deeper in a block is the same mistake
            found = _example_states().get((err.state.position, err.token.type))
    if found:
        message, help_text = found
    if not help_text and "`}`" in label and message == "unexpected end of file":
        help_text = "a `{` is not closed"
    if not help_text and not (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        help_text = _keyword_hint(text, line, col, parser)
    return Diagnostic("E001", message, Span(file, line, col, line, col + width), label=label, help=help_text)


def _keyword_hint(text: str, line: int, col: int, parser: Lark) -> str:
    """`did you mean `repeat`?` when a word on the error's line, up to the error, is not a keyword of the language
    but is close to one (`repeats n { ... }`, `placement vshaped`, `schedle "X"`); else ""."""
    keywords = {
        str(t.pattern.value)
        for t in parser.terminals
        if t.pattern.type == "str" and str(t.pattern.value).isidentifier()
    }
    lines = source_lines(text)
    if not 1 <= line <= len(lines):
        return ""
    source = lines[line - 1]
    words = [(m.start(), m.group()) for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", source) if m.start() < col]
    for _, word in reversed(words):  # the nearest word to the error first
        if word in keywords:
            continue
        close = difflib.get_close_matches(word, sorted(keywords), n=1, cutoff=0.8)
        if close:
            return f"did you mean `{close[0]}`? (`{word}` is not a keyword)"
    return ""


def _join_or(items: list[str], limit: int = 8) -> str:
    if len(items) > limit:
        items = [*items[:limit], f"{len(items) - limit} more"]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


# A top-level item starts at column 1 with one of these words; after a syntax error outside any block, parsing
# resumes at the next such line.
_ITEM_START = re.compile(
    r'^(schedule|include|param|fn|require|job|placement|cost|comm|memory|partition|rule|order|table)\b|^"""', re.M
)
ITEM_START = _ITEM_START  # public: the language server parses a broken file item by item from these lines
# What the recovery scans the text for: strings and comments (skipped), words, braces, anything else.
_SCAN = re.compile(r'"""(?:.|\n)*?"""|"[^"\n]*"|#[^\n]*|[A-Za-z_]\w*|[{}]|;|\S')
_STATEMENT_START = {"let", "repeat", "for", "if", ";"}  # and any other name: a job


def parse(text: str, file: str = "<string>") -> ast.SchedFile:
    """Parse a `.sched` text; raise DiagnosticError with the syntax errors found, each mistake once."""
    if "\0" in text:
        raise DiagnosticError([_nul_byte(text, file)])
    too_deep = _nesting_error(text, file)
    if too_deep is not None:  # before lark: 200,000 unclosed `{` are refused in milliseconds, not parsed twice
        raise DiagnosticError([too_deep])
    with paused_gc():
        try:
            items = _parse_to_ast(text, _ToAst(file))
        except UnexpectedInput:
            raise DiagnosticError(_recover(text, file)) from None
        except _Refused:
            # Rare (a too-deep expression, an over-long number): the tree-based path below names the same node
            # the refusal always named, and a syntax error anywhere still wins over it.
            raise DiagnosticError([_refusal_by_tree(text, file)]) from None
    return ast.SchedFile(path=file, text=text, items=items)


def _refusal_by_tree(text: str, file: str) -> Diagnostic:
    """What a file the tree-less parse refused gets: its syntax errors, else the refusal `_to_ast` finds."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput:
        raise DiagnosticError(_recover(text, file)) from None
    try:
        _to_ast(tree, _ToAst(file))
    except _Refused as err:
        return err.diagnostic
    raise AssertionError("the tree-less parse refused a file the tree-based one accepts")  # pragma: no cover


def _nul_byte(text: str, file: str) -> Diagnostic:
    """A NUL byte, even in a comment, is refused: no text file holds one (it is a binary or damaged file), and
    Python, terminals and C tools stop at it, so it would break what ppdsl writes from the file (a plan module)."""
    at = text.index("\0")
    line = text.count("\n", 0, at) + 1
    col = at - text.rfind("\n", 0, at)
    return Diagnostic(
        "E001",
        "the file contains a NUL byte",
        Span(file, line, col, line, col + 1),
        help="a `.sched` file is text: remove the NUL byte (editors show it as `^@`)",
    )


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside: a parse makes millions of objects, none in a cycle, and CPython's
    collector walked them again and again as they piled up (half the time of a 40,000-line file, and growing
    faster than the file). Nested uses are fine: the outermost turns it back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Nesting is bounded here, explicitly, so that no later pass (the resolver, the compilers, Python's own compiler)
# recurses without end. Blocks: every `{` (an order, a rule, a table, `repeat`, `for`, `if`) opens one level.
# Expressions: a level per operator, call or parenthesis. Python compiles an order's blocks as indented code (at
# most 100 levels) and a deep expression as deep recursion; these limits keep well under both.
MAX_BLOCK_DEPTH = 64
MAX_EXPR_DEPTH = 100
# Braces and parentheses, with strings and comments skipped (a `{` inside a string opens nothing).
_BRACKETS = re.compile(r'"""(?:.|\n)*?"""|"[^"\n]*"|#[^\n]*|[{}()]')


def _nesting_error(text: str, file: str) -> Diagnostic | None:
    """E065 at the first `{` or `(` past its limit, from a scan of the text (linear, no parse)."""
    if text.count("{") <= MAX_BLOCK_DEPTH and text.count("(") <= MAX_EXPR_DEPTH:
        return None  # cannot nest that deep: skip the scan
    braces = parens = 0
    for m in _BRACKETS.finditer(text):
        ch = m.group()
        if ch == "{":
            braces += 1
            if braces > MAX_BLOCK_DEPTH:
                return _deep_diagnostic(file, _span_at(file, text, m.start()), "block")
        elif ch == "}":
            braces = max(braces - 1, 0)
        elif ch == "(":
            parens += 1
            if parens > MAX_EXPR_DEPTH:
                return _deep_diagnostic(file, _span_at(file, text, m.start()), "expression")
        elif ch == ")":
            parens = max(parens - 1, 0)
    return None


def _span_at(file: str, text: str, pos: int) -> Span:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return Span(file, line, col, line, col + 1)


def _deep_diagnostic(file: str, span: Span, what: str) -> Diagnostic:
    if what == "block":
        return Diagnostic(
            "E065",
            f"blocks are nested too deeply: more than {MAX_BLOCK_DEPTH} levels",
            span,
            label=f"block level {MAX_BLOCK_DEPTH + 1}",
            help="move the inner part into a block of its own, or close the blocks that are still open",
        )
    return Diagnostic(
        "E065",
        f"expression nested too deeply: more than {MAX_EXPR_DEPTH} levels",
        span,
        label=f"level {MAX_EXPR_DEPTH + 1}",
        help="split it with `let`, or write a `fn` for the repeated part",
    )


class _Refused(Exception):
    """A node the AST cannot hold: nested too deeply, or a number too long for Python's int()."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


# The rules that add a level to an expression (operators and calls; parentheses are counted by the scan).
_EXPR_RULES = frozenset({"binop", "compare", "and_op", "or_op", "not_op", "neg", "cond_expr", "call"})


def _to_ast(tree: Tree, builder: _ToAst):
    """The AST of a lark tree, built children first without recursion (lark's Transformer recurses, and a long
    chain such as `1 + 1 + ... + 1` is as deep as it is long). Raises _Refused past MAX_EXPR_DEPTH.

    The tree is used up: each subtree, once built, holds (its AST value, its expression depth) as its children,
    so that its parent finds them without a lookup."""
    methods = {}
    for sub in tree.iter_subtrees():  # every subtree after its children
        children, depth = [], 0
        for child in sub.children:
            if type(child) is Tree:
                value, child_depth = child.children
                children.append(value)
                if child_depth > depth:
                    depth = child_depth
            else:
                children.append(child)
        rule = sub.data
        if rule in _EXPR_RULES:
            depth += 1
            if depth > MAX_EXPR_DEPTH:
                raise _Refused(_deep_diagnostic(builder.file, builder._span(sub.meta), "expression"))
        else:
            depth = 0
        method = methods.get(rule)
        if method is None:
            method = methods[rule] = getattr(builder, rule)
        try:
            sub.children = (method(sub.meta, children), depth)
        except ValueError:  # int() of a literal over Python's 4300-digit limit
            raise _Refused(Diagnostic("E001", "a number has too many digits", builder._span(sub.meta))) from None
    return tree.children[0]


class _Node:
    """A reduced rule on the parser's stack, in place of a lark Tree: its AST value (or, for a rule lark inlines,
    the list of its children's values), its expression depth and its position. The position follows lark's
    `propagate_positions`: `line`..`end_column` is the node's own span, `c_*` the span of the text it was
    reduced from (wider when a rule such as `"(" expr ")"` passed the node up; the parent's span starts there)."""

    __slots__ = (
        "c_column",
        "c_end_column",
        "c_end_line",
        "c_line",
        "column",
        "depth",
        "empty",
        "end_column",
        "end_line",
        "line",
        "value",
    )


def _start_of(children: list) -> tuple[int, int] | None:
    for c in children:
        if type(c) is _Node:
            if not c.empty:
                return c.c_line, c.c_column
        else:
            return c.line, c.column
    return None


def _end_of(children: list) -> tuple[int, int] | None:
    for c in reversed(children):
        if type(c) is _Node:
            if not c.empty:
                return c.c_end_line, c.c_end_column
        else:
            return c.end_line, c.end_column
    return None


def _spanned(node: _Node, children: list) -> _Node:
    start, end = _start_of(children), _end_of(children)
    node.empty = start is None
    if start is not None:
        node.line, node.column = node.c_line, node.c_column = start
        node.end_line, node.end_column = node.c_end_line, node.c_end_column = end
    else:
        node.line = node.column = node.end_line = node.end_column = None
    return node


def _rule_callback(rule, builder: _ToAst, methods: dict):
    """What the LALR parser calls when it reduces `rule`: lark's tree building (child filter, inlining of
    `_rules`, `?rule` pass-through, positions) done straight into AST values."""
    expansion = rule.expansion
    keep_all = rule.options.keep_all_tokens
    kept = [
        (i, not sym.is_term and sym.name.startswith("_"))
        for i, sym in enumerate(expansion)
        if keep_all or not (sym.is_term and sym.filter_out)
    ]
    name = rule.alias or rule.options.template_source or rule.origin.name
    passes_up = bool(rule.options.expand1 and not rule.alias)
    if passes_up and len(expansion) == 1 and len(kept) == 1 and not kept[0][1]:
        return _first  # `?a: b`: b is a's value, its position unchanged
    inline = name.startswith("_")
    counts_depth = name in _EXPR_RULES
    method = None if inline else methods.setdefault(name, getattr(builder, name, None))

    def reduce(s: list):
        values: list = []
        depth = 0
        for i, flatten in kept:
            c = s[i]
            if type(c) is _Node:
                if c.depth > depth:
                    depth = c.depth
                if flatten:
                    if values:
                        values += c.value
                    else:
                        values = c.value  # left recursion (`item*`): the list grows in place
                else:
                    values.append(c.value)
            else:
                values.append(c)
        if passes_up and len(values) == 1:
            c = s[kept[0][0]]
            if type(c) is _Node and len(s) > 1:
                start, end = _start_of(s), _end_of(s)
                if start is not None:
                    c.c_line, c.c_column = start
                    c.c_end_line, c.c_end_column = end
            return c
        node = _spanned(_Node(), s)
        if inline:
            node.value, node.depth = values, depth
            return node
        if counts_depth:
            depth += 1
            if depth > MAX_EXPR_DEPTH:
                raise _Refused(_deep_diagnostic(builder.file, builder._span(node), "expression"))
        else:
            depth = 0
        node.depth = depth
        try:
            node.value = method(node, values)
        except ValueError:  # int() of a literal over Python's 4300-digit limit
            raise _Refused(Diagnostic("E001", "a number has too many digits", builder._span(node))) from None
        return node

    return reduce


def _first(s: list):
    return s[0]


@functools.lru_cache(maxsize=1)
def _table() -> tuple[list, dict, int, int]:
    """The parse table as the loop in `_parse_to_ast` reads it: the rules, and for each state and token either
    (None, next state) for a shift or (index of the rule, (size of the rule, the rule's name)) for a reduce."""
    table = _parser().parser.parser._parse_table
    rules: list = []
    index: dict[int, int] = {}
    states: dict = {}
    for state, actions in table.states.items():
        row = states[state] = {}
        for token, (action, arg) in actions.items():
            if action is Shift:
                row[token] = (None, arg)
            else:
                if id(arg) not in index:
                    index[id(arg)] = len(rules)
                    rules.append(arg)
                row[token] = (index[id(arg)], (len(arg.expansion), arg.origin.name))
    return rules, states, table.start_states["start"], table.end_states["start"]


class _Scanners(dict):
    """State -> how lark's contextual lexer scans in it (its regexes, token callbacks, which terminals hold
    newlines and which are skipped), read from lark's lexer of that state when the state is first met (lark
    compiles a state's regexes lazily too: building them all would slow every start-up)."""

    def __init__(self, lexers: dict):
        super().__init__()
        self.lexers = lexers

    def __missing__(self, state: int) -> tuple:
        lexer = self.lexers[state]
        scanner = lexer.scanner  # compiles the regexes and makes `lexer.callback`
        if scanner.use_bytes:  # pragma: no cover - not how ppdsl builds it
            raise AssertionError("the .sched lexer matches text, not bytes")
        found = self[state] = (scanner._mres, lexer.callback, lexer.newline_types, lexer.ignore_types)
        return found


@functools.lru_cache(maxsize=1)
def _scanners() -> _Scanners:
    return _Scanners(_parser().parser.lexer.lexers)


def _parse_to_ast(text: str, builder: _ToAst) -> list:
    """The top-level items of `text`, built by the parser's own reductions: no parse tree is made (lark's
    Transformer-at-parse-time cannot pass positions, so the callbacks are ours), and the LALR loop is lark's
    `feed_token` without its per-token call and checks. Lark's lexer makes the tokens. Raises lark's
    UnexpectedInput on a syntax error (`_recover` then parses again, with lark's own loop, to report it) and
    _Refused past MAX_EXPR_DEPTH or for a number too long."""
    rules, states, state, end_state = _table()
    methods: dict = {}
    reduce = [_rule_callback(rule, builder, methods) for rule in rules]
    state_stack, value_stack = [state], []
    scanners = _scanners()
    token = None
    pos, line, line_start, length = 0, 1, 0, len(text)
    while pos < length:
        # lark's contextual lexer, inline: the next token as the terminals of this state match it
        mres, callbacks, newline_types, ignore_types = scanners[state_stack[-1]]
        for mre in mres:
            m = mre.match(text, pos)
            if m:
                break
        else:  # _recover lexes again with lark's lexer, which names what it expected
            raise UnexpectedCharacters(text, pos, line, pos - line_start + 1)
        value, kind = m.group(0), m.lastgroup
        start, start_line, column = pos, line, pos - line_start + 1
        pos += len(value)
        if kind in newline_types:
            newlines = value.count("\n")
            if newlines:
                line += newlines
                line_start = start + value.rindex("\n") + 1
        if kind in ignore_types and kind not in callbacks:
            continue
        token = Token(kind, value, start, start_line, column)
        token.end_line, token.end_column, token.end_pos = line, pos - line_start + 1, pos
        if kind in callbacks:
            token = callbacks[kind](token)
            kind = token.type
        if kind in ignore_types:
            continue
        # the LALR loop: reduce while the table says so, then shift the token
        while True:
            try:
                rule, arg = states[state_stack[-1]][kind]
            except KeyError:
                raise UnexpectedToken(token, set()) from None
            if rule is None:
                state_stack.append(arg)
                value_stack.append(token)
                break
            _reduce(reduce[rule], arg, states, state_stack, value_stack)
    end = Token.new_borrow_pos("$END", "", token) if token else Token("$END", "", 0, 1, 1)
    while True:
        try:
            rule, arg = states[state_stack[-1]]["$END"]
        except KeyError:
            raise UnexpectedToken(end, set()) from None
        if rule is None:  # pragma: no cover - lark's tables never shift the end of input
            raise UnexpectedToken(end, set())
        _reduce(reduce[rule], arg, states, state_stack, value_stack)
        if state_stack[-1] == end_state:
            return value_stack[-1].value


def _reduce(callback, arg: tuple[int, str], states: dict, state_stack: list, value_stack: list) -> None:
    """One LALR reduction: the rule's `size` values popped and built into one by its callback, then the goto of
    the rule's `name` from the state uncovered."""
    size, name = arg
    if size:
        children = value_stack[-size:]
        del state_stack[-size:], value_stack[-size:]
    else:
        children = []
    value_stack.append(callback(children))
    state_stack.append(states[state_stack[-1]][name][1])


def _recover(text: str, file: str) -> list[Diagnostic]:
    """Parse again, recovering from each error (panic mode, as compilers do): drop the statement being parsed,
    or the top-level item when the error is outside any block, and go on at the next one. Each mistake is
    reported once, and mistakes after it, in the same block or in later items, are still found."""
    parser = _parser()
    interactive = parser.parse_interactive(text)
    lexer, state = interactive.lexer_thread.lexer, interactive.parser_state
    errors: list[Diagnostic] = []
    pos, last = 0, None
    for _ in range(4 * MAX_SYNTAX_ERRORS):  # each pass reports an error or ends; a bound all the same
        thread = LexerThread.from_text(lexer, TextSlice(text, pos, len(text)))
        try:
            for token in thread.lex(state):
                last = token
                state.feed_token(token)
            state.feed_token(Token.new_borrow_pos("$END", "", last) if last else Token("$END", ""), True)
            break
        except UnexpectedInput as err:
            at = _error_pos(err, text)
            unclosed = _unclosed(state, file, text) if at >= len(text) else None
            errors.append(unclosed or _syntax_diagnostic(err, file, text, parser))
            if at >= len(text) or len(errors) >= MAX_SYNTAX_ERRORS:
                break
            resume = _resume(state, text, at)
            if resume is None:
                break
            pos = resume
    return errors or [Diagnostic("E001", "syntax error", Span(file, 1, 1, 1, 2))]


def _error_pos(err: UnexpectedInput, text: str) -> int:
    if isinstance(err, UnexpectedToken):
        if err.token.type == "$END":
            return len(text)
        start = getattr(err.token, "start_pos", None)
        return start if start is not None else len(text)
    pos = getattr(err, "pos_in_stream", None)
    return len(text) if pos is None or pos < 0 else pos


def _resume(state, text: str, at: int) -> int | None:
    """Unwind the parser to the block (or the top level) the error is in, and say where to go on: the next
    statement of that block (or its `}`), or the next top-level item. None: there is nowhere to go on."""
    states = state.parse_conf.states
    stack, values = state.state_stack, state.value_stack
    for i in range(len(stack) - 1, -1, -1):
        # Shifts only: LALR merges lookaheads, so a state deep in an expression may reduce on `let` or `order`.
        actions = states[stack[i]]
        if actions.get("LET", (None,))[0] is Shift:  # where a statement of a block can start
            dropped = values[i:]
            del stack[i + 1 :], values[i:]
            opened = sum(1 for v in dropped if isinstance(v, Token) and v.type == "LBRACE")
            return _next_statement(text, at, opened, _first_line(dropped))
        if actions.get("ORDER", (None,))[0] is Shift:  # where a top-level item can start
            del stack[i + 1 :], values[i:]
            following = _ITEM_START.search(text, _line_end(text, at))
            return following.start() if following else None
    return None


def _first_line(values: list) -> int | None:
    for v in values:
        line = getattr(v, "line", None) or getattr(getattr(v, "meta", None), "line", None)
        if line:
            return line
    return None


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _next_statement(text: str, at: int, depth: int, started: int | None) -> int:
    """Where the block the error is in goes on: the first statement that starts a line after the broken one, at
    the block's own brace depth (`depth` braces were opened by the dropped part), or the `}` that closes it."""
    error_line = text.count("\n", 0, at) + 1
    for m in _SCAN.finditer(text, at):
        word = m.group()
        if word[0] in '#"':
            continue
        if word == "{":
            depth += 1
            continue
        if word == "}":
            if depth == 0:
                return m.start()
            depth -= 1
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        first_on_line = not text[line_start : m.start()].strip()
        starts = word in _STATEMENT_START or word[0].isalpha() or word[0] == "_"
        if depth == 0 and starts and first_on_line:
            line = text.count("\n", 0, m.start()) + 1
            if line > error_line or (m.start() == at and started is not None and line > started):
                return m.start()
    return len(text)


def _unclosed(state, file: str, text: str) -> Diagnostic | None:
    """The file ends inside a block: point at the `{` that is open (rustc's "unclosed delimiter"). None when no
    block is open."""
    open_braces = [v for v in state.value_stack if isinstance(v, Token) and v.type == "LBRACE"]
    if not open_braces:
        return None
    brace = open_braces[-1]
    notes = []
    suspect = _misindented_pair(text)
    if suspect is not None:
        opened, closed = suspect
        notes.append(
            f"the `}}` on line {closed} closes the `{{` on line {opened}, though their indentation differs: "
            f"is that block missing its `}}`?"
        )
    span = Span(file, brace.line, brace.column, brace.line, brace.column + 1)
    return Diagnostic(
        "E001",
        "the file ends inside a block: this `{` is never closed",
        span,
        label="unclosed `{`",
        help="add `}` after the block's last statement",
        notes=notes,
    )


def _misindented_pair(text: str) -> tuple[int, int] | None:
    """(line of `{`, line of its `}`) of the first pair whose `}` starts a line indented unlike the `{`'s line."""
    stack: list[int] = []
    for m in _SCAN.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif m.group() == "}" and stack:
            opened = stack.pop()
            line_start = text.rfind("\n", 0, m.start()) + 1
            if text[line_start : m.start()].strip():
                continue  # `}` after code on its line: no indentation to compare
            open_start = text.rfind("\n", 0, opened) + 1
            open_indent = len(text[open_start:opened]) - len(text[open_start:opened].lstrip())
            if m.start() - line_start != open_indent:
                return text.count("\n", 0, opened) + 1, text.count("\n", 0, m.start()) + 1
    return None


def _unquote(tok: Token) -> str:
    return str(tok)[1:-1]


class _ToAst:
    """Builds AST nodes only; meaning is checked later. A method per grammar rule, called by `_to_ast` with the
    rule's meta (its position) and its children, already built."""

    def __init__(self, file: str):
        self.file = file

    def _span(self, meta) -> Span:
        return Span.from_meta(self.file, meta)

    def _tok_span(self, tok: Token) -> Span:
        return Span(self.file, tok.line, tok.column, tok.end_line, tok.end_column)

    # --- top level
    def start(self, meta, items):
        return [i for i in items if i is not None]

    def empty(self, meta, _):
        return None

    def docstring(self, meta, children):
        (tok,) = children
        body = str(tok)[3:-3]
        return ast.Docstring(_dedent(body), self._span(meta))

    def schedule_name(self, meta, children):
        (tok,) = children
        name = _unquote(tok) if tok.type == "STRING" else str(tok)
        return ast.ScheduleName(name, self._span(meta))

    def include(self, meta, children):
        return ast.Include(_unquote(children[0]), self._span(meta))

    def param(self, meta, children):
        name, default = children
        return ast.Param(str(name), default, self._span(meta))

    def fn_def(self, meta, children):
        name, *params, body = children
        return ast.FnDef(str(name), tuple(str(p) for p in params), body, self._span(meta), self._tok_span(name))

    def require(self, meta, children):
        cond, msg = children
        return ast.Require(cond, _unquote(msg), self._span(meta))

    def alias(self, meta, children):
        return str(children[0])

    def job(self, meta, children):
        name = children[0]
        rest = list(children[1:])
        alias = None
        if rest and isinstance(rest[0], str) and not isinstance(rest[0], Token):
            alias = rest.pop(0)
        region_tok = rest.pop(0)
        ops: list[str] = []
        before = after = None
        receives = sends = False
        for kind, value in rest:
            if kind == "ops":
                ops.extend(value)
            elif kind == "before":
                before = value
            elif kind == "after":
                after = value
            elif kind == "receives":
                receives = True
            elif kind == "sends":
                sends = True
        return ast.JobDecl(
            str(name),
            alias,
            str(region_tok),
            tuple(ops),
            before,
            after,
            receives,
            sends,
            self._span(meta),
            self._tok_span(region_tok),
        )

    def job_ops(self, meta, children):
        return ("ops", [_unquote(t) for t in children])

    def job_before(self, meta, children):
        return ("before", str(children[0]))

    def job_after(self, meta, children):
        return ("after", str(children[0]))

    def job_receives(self, meta, children):
        return ("receives", True)

    def job_sends(self, meta, children):
        return ("sends", True)

    def placement(self, meta, children):
        kind, expr = children[0]
        return ast.Placement(kind, expr, self._span(meta))

    def looped(self, meta, children):
        return ("looped", None)

    def vshape(self, meta, children):
        return ("vshape", None)

    def stage_expr(self, meta, children):
        return ("expr", children[0])

    def cost(self, meta, children):
        name, value = children
        return ast.Cost(str(name), value, self._span(meta))

    def comm(self, meta, children):
        *names, value = children  # `comm latency = ...`, or a link's setting: `comm offload bandwidth = ...`
        return ast.Comm(" ".join(map(str, names)), value, self._span(meta))

    def memory(self, meta, children):
        name, verb, value = children
        return ast.Memory(str(name), str(verb), value, self._span(meta))

    def memory_limit(self, meta, children):
        return ast.MemoryLimit(children[0], self._span(meta))

    def partition(self, meta, children):
        counts, layout = children[0]
        return ast.Partition(counts, layout, len(children) > 1, self._span(meta))

    def partition_counts(self, meta, children):
        return (tuple(int(t) for t in children), None)

    def partition_layout(self, meta, children):
        return (None, _unquote(children[0]))

    def allow_empty(self, meta, children):
        return True

    def memory_setting(self, meta, children):
        subject, key, value = children
        return ast.MemorySetting(str(subject), str(key), value, self._span(meta))

    def rule(self, meta, children):
        pattern = _unquote(children[0])
        rest = list(children[1:])
        job = None
        if rest and isinstance(rest[0], Token):
            job = str(rest.pop(0))
        stream = stream_span = None
        priority = None
        attrs, attr_spans = [], []
        for kind, value, span in rest:
            if kind == "stream":
                stream, stream_span = value, span
            elif kind == "priority":
                priority = value
            else:
                attrs.append(value)
                attr_spans.append(span)
        span = self._span(meta)
        return ast.Rule(pattern, job, stream, priority, tuple(attrs), span, stream_span, tuple(attr_spans))

    def rule_stream(self, meta, children):
        return ("stream", _unquote(children[0]), self._span(meta))

    def rule_priority(self, meta, children):
        return ("priority", children[0], self._span(meta))

    def rule_attr(self, meta, children):
        name, value = children
        value = value.value if isinstance(value, (ast.Num, ast.Bool)) else value
        return ("attr", (str(name), value), self._span(meta))

    def str_lit(self, meta, children):
        return _unquote(children[0])

    def order(self, meta, children):
        return ast.Order(children[0], self._span(meta))

    def table(self, meta, children):
        when = None
        if children and not isinstance(children[0], ast.TableRow):
            when, children = children[0], children[1:]
        return ast.Table(tuple(children), when, self._span(meta))

    def table_row(self, meta, children):
        rank_tok, *cells = children
        return ast.TableRow(int(rank_tok), tuple(cells), self._span(meta))

    def cell(self, meta, children):
        text = ".".join(str(c) for c in children)
        return ast.Cell(text, self._span(meta))

    # --- statements
    def block(self, meta, children):
        return tuple(c for c in children if c is not None)

    def let(self, meta, children):
        name, value = children
        return ast.Let(str(name), value, self._span(meta))

    def job_stmt(self, meta, children):
        name = children[0]
        kwargs: tuple = ()
        times = None
        for child in children[1:]:
            if isinstance(child, tuple) and (not child or isinstance(child[0], tuple)):
                kwargs = child
            else:
                times = child
        return ast.JobStmt(str(name), kwargs, times, self._span(meta), self._tok_span(name))

    def call_args(self, meta, children):
        return tuple(c for c in children if c is not None)

    def kwarg(self, meta, children):
        name, value = children
        return (str(name), value, self._tok_span(name))

    def repeat(self, meta, children):
        count, body = children
        return ast.Repeat(count, body, self._span(meta))

    def for_loop(self, meta, children):
        var, start, stop, body = children
        return ast.For(str(var), start, stop, body, self._span(meta))

    def if_stmt(self, meta, children):
        cond, body, *rest = children
        branches = [(cond, body)]
        orelse: tuple = ()
        for item in rest:
            if isinstance(item, list):
                branches.append((item[0], item[1]))
            else:
                orelse = item
        return ast.If(tuple(branches), orelse, self._span(meta))

    def elif_clause(self, meta, children):
        return [children[0], children[1]]

    # --- expressions
    def int_lit(self, meta, children):
        return ast.Num(int(children[0]), self._span(meta))

    def float_lit(self, meta, children):
        return ast.Num(float(children[0]), self._span(meta))

    def true(self, meta, children):
        return ast.Bool(True, self._span(meta))

    def false(self, meta, children):
        return ast.Bool(False, self._span(meta))

    def var(self, meta, children):
        return ast.Var(str(children[0]), self._span(meta))

    def rank_var(self, meta, children):
        return ast.Var("rank", self._span(meta))

    def stage_var(self, meta, children):
        return ast.Var("stage", self._span(meta))

    def call(self, meta, children):
        name, *args = children
        return ast.Call(str(name), tuple(a for a in args if a is not None), self._span(meta), self._tok_span(name))

    def binop(self, meta, children):
        left, op, right = children
        return ast.BinOp(str(op), left, right, self._span(meta))

    def compare(self, meta, children):
        left, op, right = children
        return ast.BinOp(str(op), left, right, self._span(meta))

    def and_op(self, meta, children):
        return ast.BinOp("and", children[0], children[1], self._span(meta))

    def or_op(self, meta, children):
        return ast.BinOp("or", children[0], children[1], self._span(meta))

    def not_op(self, meta, children):
        return ast.Unary("not", children[0], self._span(meta))

    def neg(self, meta, children):
        return ast.Unary("-", children[0], self._span(meta))

    def cond_expr(self, meta, children):
        test, then, orelse = children
        return ast.Cond(test, then, orelse, self._span(meta))


def _dedent(text: str) -> str:
    import textwrap

    lines = text.strip("\n").split("\n")
    if not lines:
        return ""
    first, rest = lines[0].strip(), textwrap.dedent("\n".join(lines[1:]))
    return (first + ("\n" + rest if rest else "")).strip()
