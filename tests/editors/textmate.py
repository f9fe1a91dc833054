"""A minimal TextMate tokenizer, enough for `editors/vscode/syntaxes/sched.tmLanguage.json`: `match` rules with
`captures`, `begin`/`end` rules (over several lines) with `beginCaptures` and nested `patterns`, and `include` of
`#repository` entries and `$self`. As VS Code's engine, it reads a line at a time; at each position the rule that
matches first wins, the earlier-listed rule on a tie, and the open rule's `end` before its patterns.

The grammar's regexes are Oniguruma's; the ones it uses are written in the part Python's `re` reads the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Scopes = tuple[str, ...]


@dataclass
class _Open:
    """A begin/end rule whose `end` has not matched yet."""

    rule: dict[str, Any]
    end: re.Pattern[str]
    scopes: Scopes


class Grammar:
    def __init__(self, grammar: dict[str, Any]):
        self.grammar = grammar
        self.root: Scopes = (grammar["scopeName"],)
        self._compiled: dict[str, re.Pattern[str]] = {}

    def _re(self, pattern: str) -> re.Pattern[str]:
        if pattern not in self._compiled:
            self._compiled[pattern] = re.compile(pattern)
        return self._compiled[pattern]

    def _rules(self, patterns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rules of a pattern list, includes expanded, in order."""
        out = []
        for rule in patterns:
            include = rule.get("include")
            if include == "$self":
                out += self._rules(self.grammar["patterns"])
            elif include is not None:
                out += self._rules([self.grammar["repository"][include.lstrip("#")]])
            elif "match" in rule or "begin" in rule:
                out.append(rule)
            else:  # a repository entry that only groups patterns
                out += self._rules(rule.get("patterns", []))
        return out

    def scopes(self, text: str) -> list[list[Scopes]]:
        """For each line of `text` and each character of it, the scopes it has (outermost first)."""
        stack: list[_Open] = []
        out = []
        for line in text.split("\n"):
            chars: list[Scopes] = [self.root] * len(line)
            pos = 0
            while pos <= len(line):
                current = stack[-1].scopes if stack else self.root
                patterns = stack[-1].rule.get("patterns", []) if stack else self.grammar["patterns"]
                best = None  # (start, order, kind, match, rule)
                if stack:
                    m = stack[-1].end.search(line, pos)
                    if m:
                        best = (m.start(), -1, "end", m, stack[-1].rule)
                for order, rule in enumerate(self._rules(patterns)):
                    m = self._re(rule.get("match") or rule["begin"]).search(line, pos)
                    if m and (best is None or (m.start(), order) < best[:2]):
                        best = (m.start(), order, "begin" if "begin" in rule else "match", m, rule)
                if best is None:
                    chars[pos:] = [current] * (len(line) - pos)
                    break
                start, _, kind, m, rule = best
                chars[pos:start] = [current] * (start - pos)  # what no rule matched has the open rule's scopes
                if kind == "end":
                    self._paint(chars, m, current, rule.get("endCaptures", {}))
                    stack.pop()
                    pos = m.end()
                    continue
                scopes = current + ((rule["name"],) if "name" in rule else ())
                captures = rule.get("captures", {}) if kind == "match" else rule.get("beginCaptures", {})
                self._paint(chars, m, scopes, captures)
                if kind == "begin":
                    stack.append(_Open(rule, self._re(rule["end"]), scopes))
                if m.end() == pos and kind == "match":
                    pos += 1  # an empty match moves on
                else:
                    pos = m.end()
            out.append(chars)
        return out

    @staticmethod
    def _paint(chars: list[Scopes], m: re.Match[str], scopes: Scopes, captures: dict[str, Any]) -> None:
        for i in range(m.start(), m.end()):
            chars[i] = scopes
        for group, capture in captures.items():
            start, end = m.span(int(group))
            for i in range(max(start, 0), end):
                chars[i] = (*scopes, capture["name"])
