"""Find and redact secrets before a memory is stored or pushed.

One rule table after gitleaks: each :class:`Rule` has a gitleaks-style id, a regex, lowercase
keywords that must appear in the text before the regex is even tried (the cheap pre-filter that
keeps scanning ordinary text fast), an optional Shannon-entropy floor and validator for the secret
part, and the true/false samples the tests check it against. It is plain ``re`` with no
third-party dependency because detect-secrets is heavy and slow to import, and this runs on every
``gitmem add``, often inside a git hook.

Only the secret part of a match is replaced by ``[REDACTED:<rule-id>]``: ``password=`` and the
scheme, user and host of a URL stay readable, a private key goes as a whole block. A placeholder
is never reported again, so :func:`redact` is idempotent.
"""

from __future__ import annotations

import bisect
import marshal
import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .errors import InvalidMemory

__all__ = ["Finding", "Rule", "RULES", "PLACEHOLDER", "scan", "redact", "redact_bare", "shannon_entropy"]

PLACEHOLDER = "[REDACTED:{rule}]"
_PLACEHOLDER_PATTERN = r"\[REDACTED:[a-z0-9-]+\]"


class Finding(NamedTuple):
    """One secret: the rule that matched and its ``[start, end)`` offsets in the scanned text.

    It carries no copy of the secret, so findings are safe to log and show.
    """

    rule: str
    start: int
    end: int


class Rule(NamedTuple):
    """One kind of secret.

    The regex's group named ``secret`` (or the whole match) is what gets replaced. ``keywords``
    are lowercase and every match contains one of them: a text containing none skips the regex, which
    is compiled only then (a command whose text names no keyword never compiles the table's patterns).
    ``one_line``: no match can hold a line break, so only the lines holding a keyword are
    searched (a pattern that may start anywhere costs time on every character of a long text).
    ``samples`` builds the true and false samples the tests check the rule against (only they need them).
    ``not_after``: a pattern for the command before a secret (its line and the lines it continues with a
    backslash), ending in ``$``: where it matches, the value is no secret for this command (mysql's
    ``--password DB`` names the database) or at this place (``arn:…:secret:NAME`` names a stored secret).
    """

    id: str
    description: str
    pattern: str
    keywords: Tuple[str, ...]
    flags: int = 0
    entropy: Optional[float] = None
    validate: Optional[Callable[[str], bool]] = None
    samples: Callable[[], Tuple[Tuple[str, ...], Tuple[str, ...]]] = lambda: ((), ())
    one_line: bool = False
    not_after: Optional[str] = None

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern, self.flags)

    @property
    def true_samples(self) -> Tuple[str, ...]:
        return self.samples()[0]

    @property
    def false_samples(self) -> Tuple[str, ...]:
        return self.samples()[1]

    def spans(self, text: str) -> List[Tuple[int, int]]:
        """Where to search ``text``: all of it, or for a ``one_line`` rule each run of lines that
        hold a keyword (matched with the regex's own flags), each with its line break."""
        if not self.one_line:
            return [(0, len(text))]
        out: List[Tuple[int, int]] = []
        for at in self._keyword_offsets(text):
            if out and at < out[-1][1]:
                continue
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end + 1
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
        return out

    def _keyword_offsets(self, text: str) -> List[int]:
        """Where a keyword starts, in order, in any case. ASCII text: plain ``find`` on the lowered text
        (same offsets, same answer as IGNORECASE); other text: a regex with the rule's flags and IGNORECASE,
        since Unicode case folding can change lengths and match more ("ſ" for "s"), and a rule that is
        case-insensitive only in part (``(?i:discord)``) has no IGNORECASE of its own."""
        if not text.isascii():
            return [m.start() for m in _keyword_regex(self.keywords, self.regex.flags | re.IGNORECASE).finditer(text)]
        lowered = text.lower()
        found = []
        for keyword in self.keywords:
            at = lowered.find(keyword)
            while at >= 0:
                found.append(at)
                at = lowered.find(keyword, at + 1)
        return sorted(found)


@lru_cache(maxsize=None)
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@lru_cache(maxsize=None)
def _keyword_regex(keywords: Tuple[str, ...], flags: int) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(k) for k in keywords), flags)


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``: random tokens score high, words and repeats low."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_B64 = _ALNUM + "+/"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def _fake(prefix: str, length: int, alphabet: str = _ALNUM, seed: str = "") -> str:
    """A pattern-valid, obviously fake secret, for a rule's samples.

    ``prefix`` plus ``length`` deterministic random-looking characters from ``alphabet``, starting
    with ``FAKE`` when the alphabet allows. Built, not written out, so that secret scanners (GitHub
    push protection included) never see a whole token in this repository's source.
    """
    import hashlib  # here: only the tests' samples are built with it

    stream = hashlib.sha256(f"{prefix}|{length}|{alphabet}|{seed}".encode()).digest()
    while len(stream) < length:
        stream += hashlib.sha256(stream).digest()
    body = "".join(alphabet[b % len(alphabet)] for b in stream[:length])
    marker = "FAKE" if all(c in alphabet for c in "FAKE") else ""
    return prefix + (marker + body)[:length]


# Patterns used only once a rule has matched, compiled then (:func:`_compiled`), as the rules' are.
_TEMPLATE_PATTERN = r"(?:\$env:\w+|\$\{?[\w.]+\}?|%\w+%|\{\{?[^{}]*\}\}?|<[^<>]*>|%\(\w+\)s|\*+|x{3,}|\.{3,}|[-_:@/])+"
_NAME_PATTERN = r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*"
_NAMING_WORD_PATTERN = r"key|token|secret|passw|passphrase|pwd|auth|credential"
# What documentation and scaffolding put where a password goes, or mask one with (``ab12****``), and the
# instructions a ``.env.example`` puts there instead (``change-this-to-a-random-string``).
_PLACEHOLDER_WORD_PATTERN = (r"your|example|placeholder|change.?me|replace.?me|dummy|redacted|xxxx|\*\*\*"
                             r"|change.?this|replace.?(?:this|with)|generate.?(?:with|one)|fill.?(?:me|in)")
# Values that say something about a password rather than being one (``password: none``, ``SECRET=true``).
_NOT_PASSWORDS = frozenset({"none", "null", "nil", "undefined", "true", "false", "yes", "no", "on", "off", "empty",
                            "unset", "required", "optional", "hidden", "masked", "prompt", "string", "bytes", "todo",
                            "enabled", "disabled", "boolean", "number", "integer", "object", "unknown"})
# ``arn:partition:service:region:account:resource``; the region and account may be empty (S3, IAM).
_ARN_PATTERN = r"arn:aws(?:-[a-z]+)*:[a-z0-9-]+:[a-z0-9-]*:(?:\d{12}|aws)?:[^\s:]"
# What comes before a Secrets Manager secret's name in its ARN (``…:secret:prod/db-AbCdEf``): a name, no value.
_SECRET_ARN = r"arn:aws(?:-[a-z]+)*:secretsmanager:[a-z0-9-]*:\d{12}:secret:$"
# A file a secret is read from, by its extension or an SSH key's default name (``deploy-2024.pem``,
# ``id_ed25519_ci``, curl's ``@pw.txt``), and a reference to a stored secret (Google Cloud's
# ``projects/P/secrets/S``, ``--set-secrets API_KEY=api-key:latest``).
_FILE_OR_REFERENCE_PATTERN = (r"@?[\w.~/-]*\.(?:pem|key|pub|crt|cer|der|p12|pfx|jks|ppk|asc|gpg|age|json|ya?ml|toml|ini"
                              r"|cfg|conf|env|txt)|id_(?:rsa|dsa|ecdsa|ed25519)[\w.-]*"
                              r"|(?:[\w.-]+=)?(?:projects/[^/\s]+/secrets/\S+|[\w.-]+:latest)")
_NUMBER_PATTERN = r"[\d\s.,:/+_-]+"  # a count, a date, a time, a version
_SEPARATORS = set("-_./:")
# One character of a value: quoted (group ``q``), anything but a blank or a quote; unquoted, also not a
# delimiter of the code, query or connection string around it.
_VALUE_CHAR = r"(?:(?(q)[^\s\"'`]|[^\s\"'`;,&()\[\]{}<>\\]))"
# Where a value ends: its closing quote, or a blank, a delimiter, an escaped line break or the end.
_VALUE_END = r"(?(q)(?P=q)|(?=[\s\"'`;,&)\]}>]|\\[nrt]|$))"
# A value holding a digit or a symbol: no bare word, which in code or prose is a variable, a type or
# a word (``password = new_password``, ``the --password option``).
_NOT_A_WORD = r"(?=" + _VALUE_CHAR + r"*?(?![A-Za-z_.-])" + _VALUE_CHAR + r")"
# The command of a line, as :attr:`Rule.not_after` reads it: a word at a command's start or after a path or a
# blank (``docker exec db mysql``, ``/usr/bin/mysql``), then its arguments up to the next pipe, ``;`` or ``&``.
_COMMAND = r"(?<![\w.-])(?:{})(?=[ \t])(?:[^\n|;&]|\\\r?\n)*?[ \t]"
# What documentation writes where a URL's password goes.
_EXAMPLE_PASSWORDS = frozenset({"pass", "password", "passwd", "pwd", "pw", "secret", "changeme"})


def _not_template(value: str) -> bool:
    """False for ``${VAR}``, ``$VAR``, ``%VAR%``, ``{{ var }}``, ``<user>:<password>``, ``%(pw)s``, ``****``, and for what
    documentation writes: a value elided with ``...`` or ``…`` (``sk-ant-api03-...``), AWS's example key pair
    (``AKIAIOSFODNN7EXAMPLE``, ``...EXAMPLEKEY``)."""
    return (not value.endswith(("...", "\u2026", "EXAMPLE", "EXAMPLEKEY"))
            and _compiled(_TEMPLATE_PATTERN, re.IGNORECASE).fullmatch(value) is None)


def _not_filler(value: str) -> bool:
    """False for documentation's placeholder tokens: repeated (:func:`_repeated`) or counted out (:func:`_counted`)."""
    return not _repeated(value) and not _counted(value)


def _repeated(value: str) -> bool:
    """A token's prefix and one character repeated (``ghp_xxxx…``, ``glpat-xxxx…``, ``lin_api_xxxx…``). Not an
    entropy floor: a real token glued to a run of letters matches as one low-entropy word."""
    return _compiled(r"[a-z]+[_-](?:pat_|live_|test_|prod_|api_)?(.)\1*", re.IGNORECASE).fullmatch(value) is not None


def _counted(value: str) -> bool:
    """Whether at least half of the letters and digits of ``value`` sit in runs counted out, three or more long
    (``abc``, ``1234``): documentation's made-up token (``ghp_123456789``, ``abcd1234efgh5678``, kubeadm's
    ``abcdef.0123456789abcdef``). A random token almost never has such runs."""
    chars = [c for c in value.lower() if c.isalnum()]
    counted, run = 0, 1
    for before, char in zip(chars, chars[1:] + [""]):
        if char and ord(char) == ord(before) + 1:
            run += 1
            continue
        counted += run if run >= 3 else 0
        run = 1
    return bool(chars) and 2 * counted >= len(chars)


def _locator(value: str) -> bool:
    """A URL, a path, a file, an AWS ARN (``arn:aws:kms:us-east-1:123456789012:key/…``) or another stored secret's
    reference (:data:`_FILE_OR_REFERENCE_PATTERN`): where a secret is, or which resource it is for, not the secret."""
    return ("://" in value or value.startswith(("/", "~/", "./", "../")) and not _random_part(value)
            or _compiled(_ARN_PATTERN, 0).match(value) is not None
            or _compiled(_FILE_OR_REFERENCE_PATTERN, re.IGNORECASE).fullmatch(value) is not None)


def _random_part(value: str) -> bool:
    """Whether a value that starts as a path does has a part no path has: 16 or more letters and digits (and
    base64's ``+``) alone, upper and lower case and digits mixed. A base64 secret starts with "/" once in 64
    (an AWS secret key under an ``API_KEY`` or ``DB_PASSWORD`` name went through as a path: 40 in 100 of those
    that do, now 2); a path's long parts hold a dot, a dash or an underscore, or keep to fewer kinds of
    character (hex ids, ``ProductionDatabase.yaml``)."""
    return any(len(part) >= 16 and part.replace("+", "").isalnum() and part.isascii() and part.lower() != part
               and part.upper() != part and any(c.isdigit() for c in part) for part in value.split("/"))


def _url_password(value: str) -> bool:
    """A URL password unless it is a template or the word documentation uses (``user:pass@``)."""
    return _not_template(value) and value.lower() not in _EXAMPLE_PASSWORDS


def _plausible_secret(value: str) -> bool:
    """Whether a value assigned to a secret-ish name looks like a secret rather than code or prose.

    Rejected: templates and placeholders (``Example-123``, ``replace-with-32-random-chars``), URLs, paths, files and
    ARNs, values counted out (``abcd1234efgh5678``), plain numbers, names of things rather than secrets
    (digit-free ``self.token``, dotted ``rust.hpke.X25519Key``, secret-naming ``Ed25519PrivateKey``),
    and values using a single character class (``username/password``).
    """
    if not _not_template(value) or _locator(value) or _counted(value):
        return False
    if _compiled(_PLACEHOLDER_WORD_PATTERN, 0).search(value.lower()):
        return False
    has_digit = any(c.isdigit() for c in value)
    if value.isdigit():
        return False
    if _compiled(_NAME_PATTERN, 0).fullmatch(value) and (
            not has_digit or "." in value or _compiled(_NAMING_WORD_PATTERN, re.IGNORECASE).search(value)):
        return False
    classes = (any(c.islower() for c in value) + any(c.isupper() for c in value) + has_digit
               + any(not c.isalnum() and c not in _SEPARATORS for c in value))
    return classes >= 2


def _assigned_password(value: str) -> bool:
    """Whether a value assigned to a password name is a password: any literal, whatever its entropy,
    unless it is a template or placeholder (``${X}``, ``****``, ``changeme``, ``your-password-here``), a
    URL, a path or an ARN, a number or a date, a word like ``none`` or ``true``, or, free of digits, names a
    secret rather than being one (``SecretStr``, ``app-db-secret``, ``new_password``)."""
    if not _url_password(value) or _locator(value):
        return False
    lowered = value.lower()
    if lowered in _NOT_PASSWORDS or _compiled(_NUMBER_PATTERN, 0).fullmatch(value):
        return False
    if _compiled(_PLACEHOLDER_WORD_PATTERN, 0).search(lowered):
        return False
    return any(c.isdigit() for c in value) or not _compiled(_NAMING_WORD_PATTERN, 0).search(lowered)


def _flag_literal(value: str) -> bool:
    """False for what a command-line flag takes besides a secret: filler (``ghp_xxxx…``), a file to read it from
    (``@token.txt``), an option list (``docker build --secret id=npmrc,src=.npmrc``: a lowercase key, then ``=``; a
    random password holds an ``=`` anywhere). A password counted out (``test1234``) is a weak password, not a
    placeholder: only a token's is (:func:`_plausible_secret`)."""
    return (not _repeated(value) and not value.startswith("@")
            and _compiled(r"[a-z][a-z0-9_-]*=(?!=|$)", 0).match(value) is None)


def _flag_value(value: str) -> bool:
    """Whether a secret flag's value is a secret: as for an assigned one (:func:`_plausible_secret`)."""
    return _plausible_secret(value) and _flag_literal(value)


def _password_flag_value(value: str) -> bool:
    """Whether a password flag's value is a password: as for an assigned one (:func:`_assigned_password`)."""
    return _assigned_password(value) and _flag_literal(value)


def _rule(id: str, description: str, pattern: str, keywords: Tuple[str, ...], *, flags: int = 0,
          true_samples: Callable[[], Tuple[str, ...]], false_samples: Callable[[], Tuple[str, ...]],
          **options) -> Rule:
    return Rule(id, description, pattern, keywords, flags, samples=lambda: (true_samples(), false_samples()),
                **options)


_PEM_LABEL = r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_NL = r"(?:\s|\\[nr])"  # a real line break or one escaped inside a JSON/YAML string
# Base64 and PEM header characters, never "-----": the lazy scan for END stops at the next BEGIN,
# so many unterminated headers cost linear, not quadratic, time.
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))"


def _pem(label: str, lines: int, end: bool = True, newline: str = "\n", headers: str = "") -> str:
    body = newline.join(_fake("", 64, _B64, seed=f"{label}{i}") for i in range(lines))
    text = "-----BEGIN " + label + "PRIVATE KEY-----" + newline + headers + body
    return text + newline + "-----END " + label + "PRIVATE KEY-----" if end else text


_PPK = r"PuTTY-User-Key-File-\d+:{value}*(?:{newline}(?:[A-Za-z-]+:{value}*|[A-Za-z0-9+/=]{{8,}})){lines}"


def _ppk(newline: str) -> str:
    return newline.join(["PuTTY-User-Key-File-" + "3: ssh-ed25519", "Encryption: none", "Key-Derivation: Argon2id",
                         "Comment: deploy", "Public-Lines: 2", _fake("", 64, _B64), _fake("", 20, _B64), "Private-Lines: 1",
                         _fake("", 44, _B64, seed="p"), "Private-MAC: " + _fake("", 64, "0123456789abcdef")])


def _jwt() -> str:
    return ("eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJmYWtlLXVzZXIifQ."
            + _fake("", 43, _ALNUM + "-_"))


# Order is priority: when two rules report the same span, the earlier (more specific) names it.
RULES: Tuple[Rule, ...] = (
    _rule("private-key", "PEM/OpenSSH/PGP private key block (or its truncated start)",
          _PEM_LABEL + r"(?:" + _PEM_BODY + r"{16,}?" + _PEM_END
          + r"|" + _NL + r"*[A-Za-z0-9+/=]{16,}(?:" + _NL + r"+[A-Za-z0-9+/=]{16,})*)",
          ("private key",),
          true_samples=lambda: (_pem("RSA ", 4), _pem("", 3, newline="\\n"), _pem("OPENSSH ", 2),
                        _pem("EC ", 3, end=False),
                        _pem("RSA ", 3, headers="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
                             + _fake("", 32, "0123456789ABCDEF") + "\n\n")),
          false_samples=lambda: ("the key file starts with `-----BEGIN PRIVATE KEY-----`",
                         "-----BEGIN PUBLIC KEY-----\n" + _fake("", 64, _B64) + "\n-----END PUBLIC KEY-----",
                         "-----BEGIN CERTIFICATE-----\n" + _fake("", 64, _B64) + "\n-----END CERTIFICATE-----")),
    _rule("anthropic-api-key", "Anthropic API, admin or OAuth key",
          r"\bsk-ant-(?:api|admin|oat|ort)\d\d-[A-Za-z0-9_-]{20,}", ("sk-ant-",),
          true_samples=lambda: (_fake("sk-ant-" + "api03-", 93, _ALNUM + "-_") + "AA",
                        "ANTHROPIC_API_KEY=" + _fake("sk-ant-" + "admin01-", 93, _ALNUM + "-_") + "AA"),
          false_samples=lambda: ("set ANTHROPIC_API_KEY to your key (sk-ant-...)", "sk-ant-api03-short")),
    _rule("openai-api-key", "OpenAI project, service-account, admin or legacy key",
          r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
          r"|[A-Za-z0-9_-]{0,80}T3BlbkFJ[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{48}\b)", ("sk-",),
          true_samples=lambda: (_fake("sk-" + "proj-", 74, _ALNUM + "-_") + "T3BlbkFJ" + _fake("", 74, _ALNUM + "-_"),
                        _fake("sk-", 20) + "T3BlbkFJ" + _fake("", 20, seed="legacy"),
                        "OPENAI_API_KEY=" + _fake("sk-", 48)),
          false_samples=lambda: ("task-force meeting, disk-usage at 80%", "sk-" + "abc123", "use sk-proj-...")),
    _rule("github-pat", "GitHub personal access token (classic)",
          r"ghp_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("ghp_",), validate=_not_filler,  # glued to a name too: no word boundary before
          true_samples=lambda: (_fake("ghp_", 36), "https://" + _fake("ghp_", 36, seed="url") + "@github.com/o/r.git",
                        "MY_TOKEN_" + _fake("ghp_", 36, seed="glued"), "x" + _fake("ghp_", 36, seed="x")),
          false_samples=lambda: ("ghp_ tokens are classic PATs", "ghp_" + "short123", "ghp_" + "x" * 36)),
    _rule("github-oauth", "GitHub OAuth access token", r"gho_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("gho_",), validate=_not_filler,
          true_samples=lambda: (_fake("gho_", 36),), false_samples=lambda: ("gho_" + "notlongenough",)),
    _rule("github-app-token", "GitHub App user-to-server or server-to-server token",
          r"gh[us]_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("ghu_", "ghs_"), validate=_not_filler,
          true_samples=lambda: (_fake("ghu_", 36), "x-access-token:" + _fake("ghs_", 36)),
          false_samples=lambda: ("ghs_" + "tooshort",)),
    _rule("github-refresh-token", "GitHub refresh token", r"ghr_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("ghr_",), validate=_not_filler,
          true_samples=lambda: (_fake("ghr_", 76),), false_samples=lambda: ("ghr_" + "x1",)),
    _rule("github-fine-grained-pat", "GitHub fine-grained personal access token",
          r"github_pat_[A-Za-z0-9_]{22,}(?![A-Za-z0-9_])", ("github_pat_",), validate=_not_filler,
          true_samples=lambda: (_fake("github_" + "pat_", 22) + "_" + _fake("", 59),),
          false_samples=lambda: ("github_pat_ is the fine-grained prefix", "github_pat_" + "short")),
    _rule("gitlab-pat", "GitLab personal access token",
          r"glpat-[A-Za-z0-9_-]{20,}(?:\.[0-9a-z]{2}\.[0-9a-z]{9})?(?![A-Za-z0-9_-])", ("glpat-",), validate=_not_filler,
          true_samples=lambda: (_fake("glpat-", 20, _ALNUM + "-_"),
                        _fake("glpat-", 27, _ALNUM + "-_") + ".01." + _fake("", 9, "abcdefghijklmnopqrstuvwxyz0123456789")),
          false_samples=lambda: ("glpat-" + "short", "glab auth login --token glpat-" + "x" * 20)),
    _rule("slack-token", "Slack bot, user, app-level, config or refresh token",
          r"\b(?:(?:xoxe\.)?xox[abeoprs]-(?:\d+-)+[A-Za-z0-9-]{8,}|xapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]{20,})",
          ("xox", "xapp-"),
          true_samples=lambda: ("xoxb-" + _fake("", 12, "0123456789") + "-" + _fake("", 13, "0123456789") + "-" + _fake("", 24),
                        "xoxe.xoxp-1-" + _fake("", 160, seed="rotating"),
                        "xa" + "pp-1-A0" + _fake("", 9, "0123456789ABCDEF") + "-" + _fake("", 13, "0123456789")
                        + "-" + _fake("", 64, "0123456789abcdef")),
          false_samples=lambda: ("xoxb-your-bot-token", "xoxo, gossip girl", "xapp-1 is the app-level prefix")),
    _rule("slack-webhook-url", "Slack incoming-webhook or workflow URL (the path is the secret)",
          r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/]{30,})",
          ("hooks.slack.com",),
          true_samples=lambda: (
              "https://hooks.slack.com/" + "services/T" + _fake("", 8) + "/B" + _fake("", 10) + "/" + _fake("", 24),),
          false_samples=lambda: ("post to https://hooks.slack.com/services/ with the team's URL",)),
    _rule("aws-access-token", "AWS access key id",
          r"(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])",
          ("a3t", "akia", "asia", "abia", "acca"), validate=_not_template,
          true_samples=lambda: (_fake("AK" + "IA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
                        "id_" + _fake("AK" + "IA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", seed="glued"),
                        "aws_access_key_id = " + _fake("AS" + "IA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
          false_samples=lambda: ("Asia-Pacific region", "AKIA prefixes mark long-term keys", "EASTASIAPACIFICREGIONCODES",
                         "AKIA" + "IOSFODNN7EXAMPLE")),
    _rule("aws-secret-key", "AWS secret access key (only next to an aws...secret name)",
          r"aws[\w \t.-]{0,20}?secret[\w \t.-]{0,20}?[\"']?[ \t]*(?:=|:=|=>|:)[ \t]*[\"']?"
          r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", ("aws",), flags=re.IGNORECASE, entropy=3.0,
          validate=_not_template,
          true_samples=lambda: ("aws_secret_access_key = " + _fake("", 40, _B64),
                        'AWS_SECRET_ACCESS_KEY="' + _fake("", 40, _B64, seed="2") + '"',
                        "AWS Secret Access Key: " + _fake("", 40, _B64, seed="3")),
          false_samples=lambda: ("aws_secret_access_key = " + "A" * 40, _fake("", 40, _B64) + " is a base64 blob",
                         "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")),
    _rule("stripe-access-token", "Stripe secret or restricted key",
          r"\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}", ("sk_", "rk_"), validate=_not_filler,
          true_samples=lambda: (_fake("sk_" + "live_", 24), _fake("rk_" + "test_", 24)),
          false_samples=lambda: ("task_live_reload = True", "sk_live_ keys are secret", "sk_live_" + "x" * 24)),
    _rule("google-api-key", "Google (GCP, Firebase, Gemini) API key",
          r"\bAIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", ("aiza",),
          true_samples=lambda: (_fake("AI" + "za", 35, _ALNUM + "-_"), "key=" + _fake("AI" + "za", 35, _ALNUM + "-_", seed="q")),
          false_samples=lambda: ("AIza" + "Short",)),
    _rule("huggingface-access-token", "Hugging Face access token", r"\bhf_[A-Za-z]{34}\b", ("hf_",),
          true_samples=lambda: (_fake("hf_", 34, _ALNUM[:52]),),
          false_samples=lambda: ("hf_hub_download(repo_id, filename)",)),
    _rule("npm-access-token", "npm access token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",),
          true_samples=lambda: (_fake("npm_", 36),), false_samples=lambda: ("npm_config_cache=/tmp/npm",)),
    _rule("pypi-upload-token", "PyPI upload token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
          ("pypi-ageichlwas5vcmc",),
          true_samples=lambda: ("pypi-" + "AgEIcHlwaS5vcmc" + _fake("", 70, _ALNUM + "-_"),),
          false_samples=lambda: ("pypi-AgEIcHlwaS5vcmc" + "short",)),
    _rule("jwt", "JSON Web Token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
          ("eyj",),
          true_samples=lambda: (_jwt(), "Cookie: session=" + _jwt()),
          false_samples=lambda: ("eyJ is what base64 of '{\"' starts with",)),
    _rule("sendgrid-api-token", "SendGrid API key (SG.<22>.<43>)",
          r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", ("sg.",),
          true_samples=lambda: ("SENDGRID_API_KEY=" + _fake("S" + "G.", 22, _ALNUM + "-_") + "." + _fake("", 43, _ALNUM + "-_"),
                        _fake("S" + "G.", 22, _ALNUM + "-_", seed="b") + "." + _fake("", 43, _ALNUM + "-_", seed="b")),
          false_samples=lambda: ("SG.example.com is the Singapore mirror", "use an SG. key from the SendGrid console")),
    _rule("twilio-api-key", "Twilio API key SID (SK + 32 hex; an auth token goes by generic-api-key)",
          r"\bSK[0-9a-fA-F]{32}\b", ("sk",), entropy=3.0,
          true_samples=lambda: (_fake("S" + "K", 32, "0123456789abcdef"),
                        "twilio api key " + _fake("S" + "K", 32, "0123456789abcdef", seed="tw")),
          false_samples=lambda: ("SKU-1234 is out of stock", "SK" + "0" * 32, "twilio_auth_token = os.environ['X']")),
    _rule("azure-storage-key", "Azure storage account key (AccountKey=... in a connection string)",
          r"(?i:accountkey)[ \t]*=[ \t]*(?P<secret>[A-Za-z0-9+/]{40,}={0,2})", ("accountkey",),
          true_samples=lambda: ("DefaultEndpointsProtocol=https;AccountName=demo;AccountKey="
                        + _fake("", 86, _B64) + "==;EndpointSuffix=core.windows.net",),
          false_samples=lambda: ("set AccountKey=<your key> in the connection string", "AccountKey=${AZURE_KEY}")),
    _rule("azure-sas-token", "Azure shared access signature (the sig= of a SAS URL or token)",
          r"(?<![A-Za-z0-9_-])sig=(?P<secret>(?:[A-Za-z0-9+/]|%2[bBfF]){30,}(?:=|%3[dD]){0,2})(?=$|[&\s\"'`<>)\]])",
          ("sig=",),
          true_samples=lambda: ("https://demo.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01"
                        "&sig=" + _fake("", 43, _B64.replace("+", "").replace("/", "")) + "%3D",
                        "SharedAccessSignature sv=2021-06-08&sig=" + _fake("", 44, _ALNUM, seed="s") + "&se=2031"),
          false_samples=lambda: ("a ?sig= parameter carries the SAS signature", "sig=short&x=1")),
    _rule("azure-ad-client-secret", "Azure AD (Entra ID) application client secret (xxx8Q~...)",
          r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])", ("q~",),
          entropy=3.0,
          true_samples=lambda: ("client_secret=" + _fake("", 3, seed="az") + "8Q~" + _fake("", 34, _ALNUM + "_~.-", seed="az"),
                        '"AZURE_CLIENT_SECRET": "' + _fake("", 3, seed="a2") + "7Q~" + _fake("", 31, seed="a2") + '"'),
          false_samples=lambda: ("client_secret=bP88Q~" + "x" * 34, "the secret starts with three characters, a digit and Q~")),
    _rule("digitalocean-token", "DigitalOcean personal, OAuth or refresh token (dop_v1_, doo_v1_, dor_v1_)",
          r"\bdo[opr]_v1_[a-f0-9]{64}\b", ("_v1_",),
          true_samples=lambda: (_fake("dop" + "_v1_", 64, "0123456789abcdef"), _fake("dor" + "_v1_", 64, "0123456789abcdef")),
          false_samples=lambda: ("dop_v1_ tokens are personal tokens", "dop_v1_" + "abc123")),
    _rule("shopify-token", "Shopify access, custom-app, private-app token or shared secret (shpat_, shpca_, ...)",
          r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", ("shpat_", "shpca_", "shppa_", "shpss_"),
          true_samples=lambda: (_fake("shp" + "at_", 32, "0123456789abcdef"), _fake("shp" + "ss_", 32, "0123456789abcdef")),
          false_samples=lambda: ("shpat_ is the Admin API token prefix", "shpat_" + "xyz")),
    _rule("gitlab-token", "GitLab runner, deploy, CI job, trigger, feed, SCIM, agent, mail or OAuth token",
          r"\b(?:glrt-|gldt-|glcbt-|glptt-|glft-|glsoat-|glagent-|glimt-|gloas-|glffct-|GR1348941)"
          r"[A-Za-z0-9_-]{20,}", ("glrt-", "gldt-", "glcbt-", "glptt-", "glft-", "glsoat-", "glagent-", "glimt-",
                                  "gloas-", "glffct-", "gr1348941"), entropy=3.0,
          true_samples=lambda: (_fake("gl" + "rt-", 20, _ALNUM + "-_"), _fake("gl" + "dt-", 20, _ALNUM + "-_"),
                        "token: " + _fake("GR" + "1348941", 20, _ALNUM + "-_"),
                        _fake("gl" + "ptt-", 40, "0123456789abcdef")),
          false_samples=lambda: ("glrt- marks a runner authentication token", "gldt-" + "X" * 20)),
    _rule("stripe-webhook-secret", "Stripe webhook signing secret (whsec_)",
          r"\bwhsec_[A-Za-z0-9+/]{24,}={0,2}", ("whsec_",),
          true_samples=lambda: (_fake("wh" + "sec_", 32), "STRIPE_WEBHOOK_SECRET=" + _fake("wh" + "sec_", 40, seed="w")),
          false_samples=lambda: ("whsec_ is the webhook secret prefix", "whsec_" + "short")),
    # Inside a JSON string its line breaks are escaped, and an unescaped quote ends it: the key, not the rest of the line.
    _rule("putty-private-key", "PuTTY private key file (.ppk), the whole key",
          _PPK.format(value=r"(?:[^\n\\\"]|\\(?![rn]))", newline=r"(?:\\r)?\\n", lines="+")
          + "|" + _PPK.format(value=r"[^\n]", newline=r"\r?\n", lines="*"),
          ("putty-user-key-file-",), flags=re.IGNORECASE,
          true_samples=lambda: (_ppk("\n"), '{"key": "' + _ppk("\\n") + '", "user": "ada"}'),
          false_samples=lambda: ("convert the .ppk with puttygen (PuTTY key file)",)),
    _rule("discord-webhook-url", "Discord webhook URL (the path's token is the secret)",
          r"discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_-]{60,})", ("discord",),
          true_samples=lambda: ("https://discord.com/api/" + "webhooks/1" + _fake("", 18, "0123456789") + "/"
                                + _fake("", 68, _ALNUM + "-_"),),
          false_samples=lambda: ("post to https://discord.com/api/webhooks/ID/TOKEN",)),
    # No prefix of its own (base64 of the bot's id, a timestamp, an HMAC): only next to a name saying Discord or
    # bot, where a dotted value that reads like a name (``self.token``) would fool generic-api-key.
    _rule("discord-bot-token", "Discord bot token next to a discord/bot name or an ``Authorization: Bot`` header",
          r"(?i:discord|\bbot)[\w \t.:=\"'`-]{0,40}?(?<![A-Za-z0-9_-])"
          r"(?P<secret>[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38})(?![A-Za-z0-9_-])",
          ("discord", "bot"), entropy=3.5, one_line=True,
          true_samples=lambda: ("DISCORD_BOT_TOKEN=" + _fake("M", 23) + "." + _fake("G", 5) + "." + _fake("a", 37),
                                "Authorization: Bot " + _fake("N", 23, seed="h") + "." + _fake("G", 5, seed="h") + "."
                                + _fake("b", 37, seed="h")),
          false_samples=lambda: ("the bot token lives in DISCORD_BOT_TOKEN", "bot: self.client.user.name")),
    _rule("netrc-password", "Password of a .netrc entry (machine HOST or default, login USER password SECRET)",
          r"(?:\bmachine\s+\S+|(?<![^\n])[ \t]*default)\s+login\s+\S+(?:\s+account\s+\S+)?\s+password\s+(?P<secret>[^\s]{6,})",
          ("machine", "default"), validate=_assigned_password,
          true_samples=lambda: ("machine api.github.com login ada password " + _fake("", 20),
                                "default login anonymous password " + _fake("", 16, seed="d"),
                                "machine api.heroku.com\n  login ada@example.com\n  password " + _fake("", 36, seed="h")),
          false_samples=lambda: ("the build machine has no login password prompt",
                                 "machine example.com login USER password ${NETRC_PASSWORD}",
                                 "by default login and password prompts are off",
                                 "default login root password changeme")),
    # The newer key has no prefix, and a shape-only rule would have no keyword: it would run on every text.
    _rule("mailgun-private-api-token", "Mailgun private API key (key- + 32 hex, or 32-8-8 hex) next to a mailgun name",
          r"(?i:mailgun)[^\n]{0,60}?(?P<secret>\bkey-[a-f0-9]{32}\b"
          r"|(?<![\w-])[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8}(?![\w-]))", ("mailgun",), entropy=3.0, one_line=True,
          true_samples=lambda: ("mailgun: " + _fake("key" + "-", 32, "0123456789abcdef"),
                                "MAILGUN_API_KEY=" + "-".join(_fake("", n, "0123456789abcdef", seed="new") for n in (32, 8, 8)),
                                "curl -s https://api.mailgun.net/v3/mg.example.com/messages # key "
                                + "-".join(_fake("", n, "0123456789abcdef", seed="curl") for n in (32, 8, 8))),
          false_samples=lambda: ("mailgun keys start with key-", "mailgun cache key-" + "0" * 32,
                                 "mailgun message 0f8e2c3a-1b2d-4e5f-8a9b-0c1d2e3f4a5b queued",
                                 "mailgun fix landed in " + _fake("", 40, "0123456789abcdef", seed="sha"),
                                 "mailgun ids " + "-".join(_fake("", n, "0123456789abcdef", seed="long") for n in (32, 8, 8, 8)),
                                 "mailgun ids " + "-".join(_fake("", n, "0123456789abcdef", seed="two") for n in (32, 8)))),
    _rule("databricks-api-token", "Databricks personal access token (dapi + 32 hex)",
          r"(?<![A-Za-z0-9])dapi[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])", ("dapi",), entropy=3.0, validate=_not_filler,
          true_samples=lambda: ("DATABRICKS_TOKEN=" + _fake("da" + "pi", 32, "0123456789abcdef"),
                                "databricks configure --token " + _fake("da" + "pi", 32, "0123456789abcdef", seed="2") + "-2"),
          false_samples=lambda: ("dapi tokens are Databricks PATs", "dapi" + "0" * 32, "dapi" + _fake("", 40, "0123456789abcdef"),
                                 "rapidapi" + _fake("", 32, "0123456789abcdef", seed="r"),
                                 "DATABRICKS_TOKEN=dapi" + "0123456789abcdef" * 2)),
    _rule("linear-api-key", "Linear personal API key (lin_api_ + 40)",
          r"(?<![A-Za-z0-9])lin_api_[A-Za-z0-9]{40}(?![A-Za-z0-9])", ("lin_api_",), validate=_not_filler,
          true_samples=lambda: (_fake("lin" + "_api_", 40), "LINEAR_API_KEY=" + _fake("lin" + "_api_", 40, seed="env")),
          false_samples=lambda: ("lin_api_ marks a Linear key", "lin_api_" + "x" * 40, "LIN_API_KEY_NAME=linear")),
    _rule("age-secret-key", "age encryption secret key (AGE-SECRET-KEY-1 + 58 bech32)",
          r"AGE-SECRET-KEY-1[" + _BECH32 + r"]{58}(?![A-Za-z0-9])", ("age-secret-key-1",), entropy=3.0,
          true_samples=lambda: (_fake("AGE-SECRET-" + "KEY-1", 58, _BECH32),
                                "# created: 2026-01-01\n# public key: age1" + _fake("", 58, _BECH32.lower()) + "\n"
                                + _fake("AGE-SECRET-" + "KEY-1", 58, _BECH32, seed="file")),
          false_samples=lambda: ("age keys start with AGE-SECRET-KEY-1", "AGE-SECRET-KEY-1" + "Q" * 58,
                                 "age1" + _fake("", 58, _BECH32.lower()) + " is the public recipient")),
    # A service token's ``hvs.`` + base64 reads like a dotted name to generic-api-key; the legacy ``s.`` + 24 is too
    # short to tell from words anywhere (``s.AcceptanceTimeoutSeconds``): only after a vault name, with a digit.
    _rule("vault-service-token", "HashiCorp Vault service token (hvs. + 90-120, or the legacy s. + 24 after a vault name)",
          r"(?<![\w.-])hvs\.[\w-]{90,120}(?![\w-])"
          r"|(?i:vault)[^\n]{0,40}?(?<![\w.-])(?P<secret>s\.(?=[A-Za-z]*\d)[A-Za-z0-9]{24})(?![\w.-])",
          ("hvs.", "vault"), entropy=3.5, validate=_not_filler, one_line=True,
          true_samples=lambda: ("VAULT_TOKEN=hvs." + _fake("", 95, _ALNUM + "-_"),
                                "-vaultToken " + _fake("hvs.", 110, _ALNUM + "-_", seed="cli"),
                                "vault login " + _fake("s.", 24, seed="legacy"),
                                'X-Vault-Token: "' + _fake("s.", 24, seed="header") + '"'),
          false_samples=lambda: ("hvs. marks a Vault service token", "hvs." + "x" * 95,
                                 "vault: s.AcceptanceTimeoutSeconds", "vault config: s." + _fake("", 24, _ALNUM[:52]),
                                 "token: " + _fake("s.", 24, seed="no-name"),
                                 "vault token s.makeKubeConfigController = args",
                                 "vault token lookup s.1234567890abcdefghij1234")),
    _rule("vault-batch-token", "HashiCorp Vault batch token (hvb. + 138-300)",
          r"(?<![\w.-])hvb\.[\w-]{138,300}(?![\w-])", ("hvb.",), entropy=4.0,
          true_samples=lambda: ("VAULT_TOKEN=" + _fake("hvb.", 150, _ALNUM + "-_"),),
          false_samples=lambda: ("hvb. marks a Vault batch token", "hvb." + _fake("", 100, _ALNUM + "-_"))),
    _rule("password-in-url", "Password in a URL's userinfo (only the password is replaced)",
          r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@'\"`<>]*:(?P<secret>[^\s/?#@'\"`<>]+)@(?=[\w\[])",
          ("://",), validate=_url_password,
          true_samples=lambda: ("postgres://app:" + _fake("", 16) + "@db.internal:5432/app",
                        "git clone https://bot:" + _fake("", 20, seed="b") + "@git.example.com/o/r.git",
                        "REDIS_URL=redis://:" + _fake("", 24, seed="redis") + "@cache.internal:6379/0"),
          false_samples=lambda: ("https://example.com/path?q=1", "ssh://git@github.com:22/o/r.git",
                         "http://localhost:8080/api", "postgres://user:${DB_PASSWORD}@db/app",
                         "https://user:<password>@host/", "git@github.com:o/r.git",
                         "e.g. `https://user:pass@host:port/path?query#fragment`")),
    # A line continued with a backslash is one command: ``-u`` may sit lines after ``curl``. A password equal to its
    # user is a product's published default (RabbitMQ's ``guest:guest``, Grafana's ``admin:admin``): kept.
    _rule("curl-auth-user", "Password of curl's -u/--user user:password (the user is kept)",
          r"\bcurl\b(?:[^\n|;&]|\\\r?\n)*?[ \t](?:-u[ \t]*|--user(?:[ \t]+|=))(?P<q>[\"'])?(?P<user>[^\s\"':]*):"
          r"(?!(?P=user)" + _VALUE_END + r")(?P<secret>" + _VALUE_CHAR + r"+)" + _VALUE_END, ("curl",),
          validate=_assigned_password,
          true_samples=lambda: ("curl -u admin:" + _fake("", 16, seed="curl") + " https://ci.internal/api/json",
                                "curl -s --user 'api:" + "-".join(_fake("", n, "0123456789abcdef", seed="u") for n in (32, 8, 8))
                                + "' https://api.eu.example.com/v3/messages",
                                "curl -X POST \\\n  --user=deploy:hunter2hunter2 \\\n  https://registry.internal/v2/"),
          false_samples=lambda: ("curl -u user:password https://host/", "curl -u $USER:$PASS https://host/",
                                 'curl --user "admin:${ADMIN_PASSWORD}" https://host/', "curl -u elastic:changeme localhost:9200",
                                 "curl -s --user 'api:YOUR_API_KEY' https://api.example.com/v3/messages",
                                 "curl -u admin https://host/ (it prompts)", "curl https://host/ | sort -u a:b1c2d3e4",
                                 "curl --upload-file notes:v2.txt https://host/", "curl -u guest:guest http://localhost:15672/api/overview",
                                 "curl -u 'admin:admin' http://localhost:3000/api/health")),
    # The space-separated twin of ``--token=VALUE``: generic-api-key's bar, not generic-password's any literal.
    # The flag's name ends in a secret word, so ``--token-file`` passes. ``-p`` is a port as often as a password:
    # left out. docker, podman, buildah and gcloud's ``--secret`` takes a secret's name or ``id=…,src=…``, never its value.
    _rule("secret-flag", "Value of a command-line flag named for a secret (--token VALUE, --api-key VALUE)",
          r"(?<![\w-])--?(?:[a-z0-9]+[-_]){0,4}"
          r"(?:token|secret|(?:api|access|secret|private)[-_]?key|credentials?)"
          r"[ \t]+(?P<q>[\"'])?(?!-)(?P<secret>" + _VALUE_CHAR + r"{8,})" + _VALUE_END,
          ("token", "secret", "key", "credential"), entropy=3.0, validate=_flag_value, one_line=True,
          not_after=_COMMAND.format("docker|podman|buildah|gcloud") + r"--secret[ \t]+[\"']?$",
          true_samples=lambda: ("gh auth login --token " + _fake("", 24, seed="flag"),
                                "tool --api-key '" + _fake("", 32, seed="key") + "' --verbose",
                                "cast send --private-key 0x" + _fake("", 64, "0123456789abcdef", seed="eth"),
                                "consul members -token "
                                + "-".join(_fake("", n, "0123456789abcdef", seed="acl") for n in (8, 4, 4, 4, 12)),
                                "--client-secret " + _fake("", 20),
                                "kubectl create secret generic db --secret " + _fake("", 20, seed="kube")),
          false_samples=lambda: ("gh auth login --token $GITHUB_TOKEN", 'tool --token "${TOKEN}"', "tool --token <token>",
                                 "tool --token %GITHUB_TOKEN%", "tool --token-file /run/secrets/token",
                                 "tool --token ghp_" + "x" * 36, "tool --token YOUR_TOKEN",
                                 "docker build --secret id=npmrc,src=.npmrc .", "docker service create --secret db_password2 app",
                                 "docker service create --secret prod-db-creds2 app",
                                 "podman run --rm --secret 'prod-db-creds2' app",
                                 "buildah build \\\n  --secret prod-db-creds2 .", "tool --api-key @key.txt",
                                 "tool --token --verbose", "tool --max-tokens 4096",
                                 "use the --token flag for CI authentication", 'tool --token "$(cat ~/.token)"',
                                 "tool --private-key ~/.ssh/id_ed25519", "ansible-playbook site.yml --private-key id_rsa_deploy2",
                                 "tool --private-key keys/deploy-2024.pem", "tool --credentials creds-prod-2024.json",
                                 "gcloud secrets versions access 3 --secret my-db-password2",
                                 "kubeadm join 192.168.0.200:6443 --token abcdef.0123456789abcdef",
                                 "tool --api-key sk-proj-abc123", "tool --token 1234567890abcdef",
                                 "tool --token $env:GITHUB_TOKEN")),
    # The space-separated twin of ``--password=VALUE``: generic-password's any literal, a bare word only quoted (the
    # ``--password option``). A database client's ``--password`` takes its value attached (``mysql --password=pw``,
    # ``-ppw``) or none (``psql --password`` prompts): the word after it is the database.
    _rule("password-flag", "Value of a command-line password flag (--password VALUE, --db-passwd VALUE)",
          r"(?<![\w-])--?(?:[a-z0-9]+[-_]){0,4}pass(?:word|wd|phrase)?"
          r"[ \t]+(?P<q>[\"'])?(?!-)(?(q)|" + _NOT_A_WORD + r")(?P<secret>" + _VALUE_CHAR + r"{6,})" + _VALUE_END,
          ("pass",), validate=_password_flag_value, one_line=True,
          not_after=_COMMAND.format(r"mysql\w*|mariadb[\w-]*|psql|pg_\w+|createdb|dropdb|createuser|dropuser|"
                                    r"vacuumdb|reindexdb|clusterdb|pgbench") + r"--pass(?:w(?:or)?d)?[ \t]+[\"']?$",
          true_samples=lambda: ("tool --password hunter2hunter2", "sshpass --password hunter2 ssh ada@host",
                                "docker login -u ada --password " + _fake("", 16, seed="pw") + " registry.internal",
                                "tool --db-password 'correcthorse'",
                                "mysql -u root -e 'select 1' | tool --password shop_2024",
                                "gpg --batch --passphrase Tr0ub4dor --symmetric notes.txt",
                                "mysql --password=x app && deploy --password shop_2024"),
          false_samples=lambda: ("mysql -u root --password app_production", "mysql -u root --password shop_2024",
                                 "mysqldump --single-transaction --password orders_2024 > dump.sql",
                                 "docker exec -it db mariadb -u root --password shop_2024",
                                 "mysql -h db.internal \\\n  --password shop_2024",
                                 "psql -U app --password orders_2024", "docker login --password-stdin < pw.txt",
                                 "tool --password $DB_PASSWORD", 'tool --password "${DB_PASSWORD}"',
                                 "tool --password <password>", "tool --password new_password",
                                 "pass the --password option to the tool", "tool --password changeme",
                                 "tool --password --verbose", "tool --bypass Zq8kd9Lm2Pw0xR7",
                                 "tool --password ****")),
    _rule("generic-api-key", "High-entropy value assigned to a password/secret/token/key/auth name",
          r"(?<![\w.-])[\w.-]{0,60}?"
          r"(?:(?<![a-z])pass(?:w(?:or)?d|phrase)?|pwd|secret|token|api[_.-]?key|access[_.-]?key|private[_.-]?key"
          r"|auth(?:orization)?|credentials?"
          # an environment variable's ``*_KEY`` (``ENCRYPTION_KEY``), not a public one's
          r"|(?-i:(?<=[A-Z0-9])(?<!PUBLIC)(?<!PUBLISHABLE)(?<!GPG)(?<!PGP)_KEY))"
          r"(?:[_.-]?(?:key|token|secret|value|header|str|string|b64|base64|hash|s))*"
          r"[\"']?[ \t]*(?:=(?!=)|:=|=>|:)[ \t]*(?P<q>[\"'`])?(?:(?:bearer|basic|token)[ \t]+)?"
          r"(?P<secret>" + _VALUE_CHAR + r"{8,})" + _VALUE_END,
          ("pass", "pwd", "secret", "token", "key", "auth", "credential"), flags=re.IGNORECASE,
          entropy=3.0, validate=_plausible_secret, one_line=True, not_after=_SECRET_ARN,
          true_samples=lambda: ("DB_PASSWORD=Sup3r" + _fake("", 10, seed="pw") + "!",
                        '"api_key": "' + _fake("", 32, seed="json") + '"',
                        "Authorization: Bearer " + _fake("", 40, seed="bearer"),
                        "curl 'https://api.example.com/v1/items?access_token=" + _fake("", 24, seed="qs") + "&page=2'",
                        "client_secret: " + _fake("", 32, "0123456789abcdef"),
                        "export MY_SERVICE_TOKEN=" + _fake("", 28, seed="env"),
                        "DB_PASS=" + _fake("", 14, seed="dbpass"), "SIGNING_KEY=" + _fake("", 44, _B64, seed="sk"),
                        "AWS_SESSION_TOKEN=IQoJb3JpZ2luX2Vj" + _fake("", 600, _B64, seed="sts") + "==",
                        '"password": "' + _fake("", 260, seed="long") + '"',
                        "API_KEY=/" + _fake("", 39, _B64, seed="slash")),
          false_samples=lambda: ('password = os.environ["DB_PASSWORD"]', "token = get_token()", "api_key: str",
                         "api_key: Optional[str] = None", "token = self.token_provider",
                         "tokenizer = AutoTokenizer.from_pretrained(name)", "tokenizer: tiktoken-cl100k",
                         "PUBLIC_KEY=" + _fake("", 44, _B64), "cache_key = " + _fake("", 40, "0123456789abcdef"),
                         "max_tokens=4096", "prompt_tokens: 1234567890", "auth: username/password",
                         "password: changeme", 'secret = "${{ secrets.DEPLOY_KEY }}"',
                         "token_url = https://oauth2.example.com/token", "secret_file: /etc/app/secret2.pem",
                         "API_KEY=/var/lib/kubelet/pods/3F2504E0-4F89-11D3-9A0C-0305E82C3301/volumes/token",
                         "SECRET_PATH=/opt/app/configs/ProductionDatabase2024Settings.yaml",
                         "KMS_KEY=arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
                         "SIGNING_KEY: arn:aws-us-gov:kms:us-gov-west-1:123456789012:alias/Signing2",
                         'api_key = "<your-api-key>"', "password = PasswordField()",
                         "the token: it expires after 10 minutes", "if token == Comment.Special:",
                         "private_key: Ed25519PrivateKey | Ed448PrivateKey", "bypass: true", "compass = Compass2D(x)",
                         "X25519PrivateKey = rust_openssl.hpke.X25519PrivateKey",
                         '{"Proxy-Authorization": "Basic <username>:<password>"}',
                         "SESSION_SECRET=replace-with-32-random-chars", "NEXTAUTH_SECRET=generate-with-openssl-rand-base64-32",
                         "aws cognito-idp initiate-auth --auth-parameters USERNAME=jane,PASSWORD=Example-123",
                         "terraform import aws_secretsmanager_secret.db "
                         "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod-db-2024",
                         "gcloud run deploy app --update-secrets=API_KEY=api-key:latest",
                         "gcloud run deploy app --set-secrets API_KEY=projects/123/secrets/api-key:2")),
    # After generic-api-key, which names what both find. A lowercase name (``password``, ``dbPassword``)
    # is also code's: its unquoted value needs a digit or a symbol, since a bare word there is a variable,
    # a type or prose (``password = new_password``, ``password: str``, ``password: see the vault``), unless
    # the name is a YAML key (at a line's start, then a colon) and the word, lowercase or capitalised, all the rest
    # of the line: ``password: Correcthorse`` (``SecretStr``, ``Optional`` stay types). After ``=`` a lowercase
    # name's bare word stays a variable (``password = userinput``), INI's ``password = correcthorse`` too: a
    # memory has no file type to tell them apart. An UPPER_CASE name is an environment variable's, a name after ``;``,
    # ``?``, ``&`` or ``--`` sits in a connection string, a query or a command line, and a quoted value is a
    # string literal: any value of theirs is a literal.
    _rule("generic-password", "Any literal value assigned to a name ending in password/passwd/pwd/passphrase/secret",
          r"(?:(?:^|(?<=\n))[ \t]*(?:-[ \t]+)?(?P<key>(?=[\"']?[\w.-]+[\"']?:(?![:=])))[\"']?)?"
          r"(?<![\w.-])(?:(?P<literal>)(?:(?<=[;?&])|(?=--)|(?-i:(?=[A-Z0-9_.-]+[\"']?[ \t]*[=:]))))?"
          r"[\w.-]{0,60}?(?:passw(?:or)?d|pass[_.-]?phrase|pwd|(?<=[_.-])pass|secret)"
          r"[\"']?[ \t]*(?:=(?!=)|:=|=>|:(?![:?]))[ \t]*(?P<q>[\"'`])?"
          r"(?(literal)|(?(q)|(?:" + _NOT_A_WORD
          + r"|(?(key)(?=(?-i:[A-Z]?[a-z]+)[ \t]*(?:#[^\n]*)?(?:\r?\n|$))|(?!)))))"
          r"(?P<secret>" + _VALUE_CHAR + r"{6,})"
          + _VALUE_END,
          ("pass", "pwd", "secret"), flags=re.IGNORECASE, validate=_assigned_password, one_line=True, not_after=_SECRET_ARN,
          true_samples=lambda: ("DB_PASSWORD=hunter2hunter2", 'DB_PASSWORD="hunter2hunter2"', "password: hunter2hunter2",
                        "PGPASSWORD=correcthorsebattery", "export MYSQL_PWD=hunter2",
                        "PGPASSWORD=correcthorse psql -h db.internal app", '"password": "hunter2hunter2"',
                        "db_password = 'hunter2hunter2'", "KEY_PASSPHRASE: correct-horse-battery",
                        "  - POSTGRES_PASSWORD=postgres", "APP_SECRET=swordfish", "webhook_secret: trout1trout1",
                        "Server=db;User Id=app;Password=correcthorse;", "mysql --password=correcthorse app",
                        "'password' => 'hunter2hunter2',", "set `DB_PASS=hunter2hunter2` in .env",
                        "password := \"hunter2hunter2\"", "password: correcthorse", "  - db_password: correcthorse\n",
                        "password: correcthorse  # the staging one", "password: Correcthorse", 'password = "postgres"',
                        "password: 'postgres'", 'DB_PASSWORD="postgres"', 'connect(password="correcthorse")'),
          false_samples=lambda: ("DB_PASSWORD=${DB_PASS}", "password: <password>", "DB_PASSWORD=changeme",
                         "password: '****'", "PASSWORD=xxxxxxxx", "DB_PASSWORD=your-password-here",
                         "password: str", "password = get_password()", "connect(password=password)",
                         "password: Optional[str] = None", 'pwd = os.environ["PWD"]', "PASSWORD_MIN_LENGTH=8",
                         "password_hash = bcrypt(password)", "the password: must be rotated monthly",
                         "password: see the vault", "password_required: true", "PASSWORD_EXPIRY_DAYS=90",
                         "SECRET=none", "DB_PASSWORD=12345678", "password: SecretStr", "password = new_password",
                         "existingSecret: app-db-secret", "PWD=/home/ada/src", "ALL=(ALL) NOPASSWD: ALL",
                         "if password == 'hunter2hunter2':", "second pass: x86_64 build", "bypass=1234567",
                         '"forgot_password": "Forgot password?"', "password: '%(password)s'",
                         "password: {{ vault_db_password }}", "DB_PASSWORD=REPLACE_ME", "password: ab12****",
                         "DB_PASSWORD=postgres://app:${PW}@db/app", "password: [REDACTED:generic-api-key]",
                         "the password is stored in vault", "Changed the admin password: yesterday",
                         "password: enabled", "  password: boolean", 'password: "${DB_PASSWORD}"',
                         "password = userinput", "password: new_password", 'password = "password"',
                         "password: Optional", "password: correcthorse;",
                         "DB_PASSWORD=arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
                         "JWT_SECRET=change-this-to-a-random-string", "tool --password ${DB_PASSWORD:?required}",
                         "tool --password=@pw.txt")),
)


_Hit = Tuple[int, int, int]  # (start, index in RULES, end): sorts by offset, then priority


# The pre-filter: every distinct keyword once, and the rules each one switches on. One flat pass
# of ``in`` over ~70 keywords; bench/redact.py measures it against the old loop over every rule's
# keywords and against one combined alternation regex (slower than plain ``in`` on long text).
_KEYWORDS: Tuple[str, ...] = tuple(sorted({k for rule in RULES for k in rule.keywords}))
_RULES_FOR: Dict[str, Tuple[int, ...]] = {
    k: tuple(i for i, rule in enumerate(RULES) if k in rule.keywords) for k in _KEYWORDS}
# The placeholder as written in fields whose syntax has no brackets (tags, source): ``REDACTED:<rule>``.
_BARE_PLACEHOLDER_PATTERN = (
    r"REDACTED:(?:" + "|".join(sorted((re.escape(r.id) for r in RULES), key=len, reverse=True))
    + r")(?![A-Za-z0-9_-])")


def blob_texts(data: bytes) -> List[str]:
    """A blob as the scan reads it: UTF-8; with NUL bytes (UTF-16 text has them) also as UTF-16 both ways;
    with a backslash also as YAML reads it (:func:`_yaml_strings`)."""
    out = [data.decode("utf-8", "replace")]
    if b"\x00" in data:
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            out.append(data.decode("utf-16", "replace"))
        else:
            out += [data.decode("utf-16-le", "replace"), data.decode("utf-16-be", "replace")]
    if b"\\" in data:
        out += _yaml_strings(out[0])
    return out


def _yaml_strings(text: str) -> List[str]:
    """Every scalar in ``text`` read as YAML (none when it is no YAML). A double-quoted scalar's escapes
    (``gh\\x70_``, an escaped line break) spell a token its bytes do not hold, and gitmem reads the memory,
    not the bytes: a blob planted with plain git would pass the push scan and the pull's, token and all.
    Composed, not constructed: a key written twice (which gitmem refuses to load) keeps both values here."""
    import yaml

    try:
        stack = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except (yaml.YAMLError, ValueError, RecursionError):  # no YAML
        return []
    seen, out = set(), []
    while stack:  # shared by aliases, a node is walked once
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            out.append(node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    return out


def blob_is_clean(data: bytes) -> bool:
    """No rule finds a secret in the blob, read every way :func:`blob_texts` reads it."""
    return not any(_fixpoint_hits(text) for text in blob_texts(data))


@lru_cache(maxsize=None)
def rules_key() -> str:
    """What a remembered "scanned clean" is valid for: a hash of every rule's definition and of the
    code that applies them (validators, the keyword pre-filter, the scan), so changing any of it
    scans every blob again."""
    code: List[Callable[..., Any]] = [r.validate for r in RULES if r.validate is not None]
    code += [shannon_entropy, Rule.spans, Rule._keyword_offsets, _candidate_rules, _hits, _command_start,
             _fixpoint_hits, blob_texts, _yaml_strings]
    import hashlib

    parts = [f"{r.id}\0{r.pattern}\0{r.flags}\0{r.keywords}\0{r.entropy}\0{r.not_after}".encode("utf-8")
             for r in RULES]
    parts += [marshal.dumps(f.__code__) for f in code]
    return hashlib.sha1(b"\n".join(parts)).hexdigest()


def _candidate_rules(lowered: str) -> List[int]:
    """Indexes of the rules whose keywords occur in ``lowered`` (one regex pass, not one per keyword)."""
    found = [k for k in _KEYWORDS if k in lowered]
    if not found:
        return []
    return sorted({i for k in found for i in _RULES_FOR[k]})


def _hits(text: str) -> List[_Hit]:
    """Every rule's accepted matches in ``text``, merged, skipping existing placeholders."""
    lowered = text.lower()
    hits: List[_Hit] = []
    for index in _candidate_rules(lowered):
        rule = RULES[index]
        group = "secret" if "secret" in rule.regex.groupindex else 0
        for match in (m for start, end in rule.spans(text) for m in rule.regex.finditer(text, start, end)):
            start, end = match.span(group)
            if start < 0:  # an alternative without a ``secret`` group matched: the whole match is secret
                start, end = match.span()
            value = text[start:end]
            if rule.entropy is not None and shannon_entropy(value) < rule.entropy:
                continue
            if rule.validate is not None and not rule.validate(value):
                continue
            if rule.not_after is not None and _compiled(rule.not_after, rule.flags).search(
                    text, _command_start(text, start), start):
                continue
            hits.append((start, index, end))
    if hits and "redacted:" in lowered:
        spans = sorted([m.span() for m in _compiled(_PLACEHOLDER_PATTERN, 0).finditer(text)]
                       + [m.span() for m in _compiled(_BARE_PLACEHOLDER_PATTERN, 0).finditer(text)
                          if not (m.start() and text[m.start() - 1] == "[")])
        ends = [end for _, end in spans]
        hits = [h for h in hits if not _overlaps(spans, ends, h[0], h[2])]
    return _merge(hits)


def _command_start(text: str, at: int) -> int:
    """Where the command holding offset ``at`` starts: its line, or the first of the lines before it that
    each end in a backslash (one command written over several lines)."""
    start = text.rfind("\n", 0, at) + 1
    while start:
        end = start - 1  # the line break ending the line before
        if end and text[end - 1] == "\r":
            end -= 1
        if not (end and text[end - 1] == "\\"):
            break
        start = text.rfind("\n", 0, end) + 1
    return start


def _overlaps(spans: List[Tuple[int, int]], ends: List[int], start: int, end: int) -> bool:
    """Whether ``[start, end)`` overlaps one of the sorted, disjoint ``spans`` (``ends`` their ends)."""
    i = bisect.bisect_right(ends, start)  # the first span ending after ``start``
    return i < len(spans) and spans[i][0] < end


def _merge(hits: List[_Hit]) -> List[_Hit]:
    merged: List[List[int]] = []
    for start, index, end in sorted(hits):
        if merged and start < merged[-1][2]:
            merged[-1][2] = max(merged[-1][2], end)
        else:
            merged.append([start, index, end])
    return [(start, index, end) for start, index, end in merged]


def _replace(text: str, hits: List[_Hit]) -> str:
    parts: List[str] = []
    position = 0
    for start, index, end in hits:
        parts.append(text[position:start])
        parts.append(PLACEHOLDER.format(rule=RULES[index].id))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _to_original(hits: List[_Hit], position: int) -> int:
    """Map an offset in ``_replace(text, hits)`` that lies outside every placeholder back to ``text``."""
    shift = 0
    for start, index, end in hits:
        if position <= start + shift:  # at or before where this placeholder begins
            break
        shift += len(PLACEHOLDER.format(rule=RULES[index].id)) - (end - start)
    return position - shift


def scan(text: str) -> List[Finding]:
    """Every secret in ``text``, sorted by offset and non-overlapping.

    Overlapping matches (a token inside ``password=...``) merge into one finding covering both,
    named by the one that starts first (or comes first in :data:`RULES`), so no secret byte
    survives :func:`redact`. Anything overlapping an existing placeholder is ignored. A match that
    only becomes valid once its neighbour is replaced (a lookahead that saw the neighbour) is found
    by scanning the redacted text again until nothing new appears, so redaction is idempotent.
    """
    return [Finding(RULES[index].id, start, end) for start, index, end in _fixpoint_hits(text)]


def _fixpoint_hits(text: str) -> List[_Hit]:
    # Terminates: new hits lie outside every placeholder, so each round covers more of ``text``.
    hits = _hits(text)
    while hits:
        extra = _hits(_replace(text, hits))
        if not extra:
            break
        hits = _merge(hits + [(_to_original(hits, s), i, _to_original(hits, e)) for s, i, e in extra])
    return hits


def redact(text: str) -> Tuple[str, List[Finding]]:
    """``text`` with every secret replaced by ``[REDACTED:<rule-id>]``, and the findings.

    Finding offsets refer to the original ``text``; everything outside them is kept byte for byte.
    """
    hits = _fixpoint_hits(text)
    return _replace(text, hits), [Finding(RULES[index].id, start, end) for start, index, end in hits]


def redact_bare(text: str) -> Tuple[str, List[Finding]]:
    """Like :func:`redact`, with placeholders written ``REDACTED:<rule-id>`` (no brackets), for
    fields whose syntax has no room for brackets: tags and sources."""
    out, findings = redact(text)
    if findings:
        out = _compiled(_PLACEHOLDER_PATTERN, 0).sub(lambda m: m.group(0)[1:-1], out)
    return out, findings


def redact_fields(**values: Optional[str]) -> Tuple[Dict[str, Optional[str]], int]:
    """Redact each string value; returns the values and how many secrets were replaced.

    Refuses text that is not valid UTF-8 (a lone surrogate) before anything is stored."""
    out: Dict[str, Optional[str]] = {}
    count = 0
    for key, value in values.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidMemory(key, "not valid UTF-8") from None
            value, findings = redact(value)
            count += len(findings)
        out[key] = value
    return out, count
