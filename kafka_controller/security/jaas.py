"""Kafka's ``sasl.jaas.config`` values: one JAAS login module entry.

The syntax is what Kafka's ``JaasConfig`` reads with Java's ``StreamTokenizer``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

a login module class name, a control flag (``required``, ``requisite``, ``sufficient``,
``optional``, any case), ``key=value`` options whose values are quoted strings (backslash escapes
as Java's) or bare words (a bare number is refused, as Kafka's tokenizer makes it a number), and a
closing ``;``. ``//`` and ``/* */`` comments are allowed. A broker's setting must hold exactly one
entry (``JaasContext.load``). Errors name the position, never the text: the values are passwords.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_controller.domain.errors import InvalidArgumentError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(repr=False)

    def __repr__(self) -> str:  # options hold passwords
        return f"JaasEntry({self.login_module} {self.flag}, options={sorted(self.options)})"


def _word_start(ch: str) -> bool:
    return ch.isalpha() or ch in "-_$" or ord(ch) >= 128


def _word_part(ch: str) -> bool:
    return _word_start(ch) or ch.isdigit() or ch == "."


class _Tokens:
    """Words, quoted strings and single characters, comments skipped."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.pos = 0
        self.where = where

    def error(self, what: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"invalid {self.where} at character {self.pos}: {what}")

    def _skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos].isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated comment")
                self.pos = end + 2
            else:
                return

    def next(self) -> tuple[str, str] | None:
        """``("word", w)``, ``("quoted", s)``, ``("number", n)``, ``("char", c)``; None at the end."""
        self._skip()
        text = self.text
        if self.pos >= len(text):
            return None
        ch = text[self.pos]
        if _word_start(ch):
            start = self.pos
            while self.pos < len(text) and _word_part(text[self.pos]):
                self.pos += 1
            return "word", text[start : self.pos]
        if ch.isdigit() or ch == ".":
            start = self.pos
            while self.pos < len(text) and (text[self.pos].isdigit() or text[self.pos] == "."):
                self.pos += 1
            return "number", text[start : self.pos]
        if ch in "\"'":
            return "quoted", self._quoted(ch)
        self.pos += 1
        return "char", ch

    def _quoted(self, quote: str) -> str:
        text = self.text
        out: list[str] = []
        self.pos += 1
        while self.pos < len(text):
            ch = text[self.pos]
            self.pos += 1
            if ch == quote:
                return "".join(out)
            if ch == "\n":
                break
            if ch == "\\" and self.pos < len(text):
                nxt = text[self.pos]
                self.pos += 1
                if nxt in "01234567":
                    digits = nxt
                    while len(digits) < 3 and self.pos < len(text) and text[self.pos] in "01234567":
                        digits += text[self.pos]
                        self.pos += 1
                    out.append(chr(int(digits, 8) & 0xFF))
                else:
                    out.append(_ESCAPES.get(nxt, nxt))
                continue
            out.append(ch)
        raise self.error("unterminated quoted value")


def parse(text: str, where: str = "sasl.jaas.config") -> JaasEntry:
    """The single login module entry of ``text``."""
    tokens = _Tokens(text, where)
    entries: list[JaasEntry] = []
    while (token := tokens.next()) is not None:
        kind, module = token
        if kind != "word":
            raise tokens.error("expected a login module class name")
        flag_token = tokens.next()
        if flag_token is None or flag_token[0] != "word" or flag_token[1].lower() not in FLAGS:
            raise tokens.error("expected a control flag (required, requisite, sufficient, optional)")
        options: dict[str, str] = {}
        while True:
            token = tokens.next()
            if token is None:
                raise tokens.error("the login module entry must end with ';'")
            if token == ("char", ";"):
                break
            if token[0] != "word":
                raise tokens.error("expected an option name")
            key = token[1]
            if tokens.next() != ("char", "="):
                raise tokens.error(f"expected '=' after option {key}")
            value = tokens.next()
            if value is None or value[0] not in ("quoted", "word"):
                raise tokens.error(f"no value specified for option {key} (quote it)")
            options[key] = value[1]
        entries.append(JaasEntry(module, flag_token[1].lower(), options))
    if len(entries) != 1:
        raise InvalidArgumentError(
            f"invalid {where}: it must hold exactly one login module entry, not {len(entries)}"
        )
    return entries[0]


__all__ = ["PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "JaasEntry", "parse"]
